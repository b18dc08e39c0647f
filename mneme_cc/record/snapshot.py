"""A snapshot of device state (a prologue or an epilogue) and its regions.

The state files and the chunk store are implemented once, in C++ (`runtime/`),
and reached through `mneme_cc._native`; contents are read lazily, chunk by
chunk, each chunk checked against its content hash.
"""

from __future__ import annotations

import collections
import json
import os
import stat
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from mneme_cc.errors import RecordDBError


class ChunkStore(Protocol):
    """Where a snapshot's chunks are read from (a RecordDB)."""

    def read_chunk(self, digest: str) -> bytes: ...


#: Threads reading a region's chunks: the native read lets go of the
#: interpreter's lock while it reads, decompresses and checks a chunk.
READ_THREADS = min(8, len(os.sched_getaffinity(0)))
#: The most bytes of chunks read ahead of the one taken.
READ_AHEAD_BYTES = 256 << 20


def read_chunks(store: ChunkStore, digests: list[str], threads: int | None = None,
                ahead: int | None = None) -> Iterator[bytes]:
    """Each digest's chunk, in order, read on up to `threads` threads
    (READ_THREADS), at most `ahead` (two a thread) read ahead of the one
    taken, whatever the region's size."""
    threads = READ_THREADS if threads is None else threads
    ahead = 2 * threads if ahead is None else ahead
    threads = min(threads, ahead, len(digests))
    if threads < 2:
        yield from map(store.read_chunk, digests)
        return
    with ThreadPoolExecutor(threads, "mneme-read") as pool:
        later = iter(digests[ahead:])
        pending = collections.deque(pool.submit(store.read_chunk, d) for d in digests[:ahead])
        try:
            while pending:
                data = pending.popleft().result()
                following = next(later, None)
                if following is not None:
                    pending.append(pool.submit(store.read_chunk, following))
                yield data
        finally:  # a reader that stopped early: what was not started never is
            for future in pending:
                future.cancel()


#: Region kinds, as the store numbers them.
ALLOCATION, GLOBAL, ARGUMENTS, IMAGE = 0, 1, 2, 3
KIND_NAMES = {ALLOCATION: "allocation", GLOBAL: "global", ARGUMENTS: "arguments",
              IMAGE: "image"}
#: Snapshot kinds, as the store numbers them.
PROLOGUE, EPILOGUE, IMAGE_STATE = 1, 2, 3
SNAPSHOT_KINDS = {PROLOGUE: "prologue", EPILOGUE: "epilogue", IMAGE_STATE: "image"}


def chunk_count(kind: int, size: int, chunk_size: int) -> int:
    """The chunks a region of `size` bytes is stored in: the kernel's
    arguments in one, whatever their size (up to 32 KiB, past the smallest
    chunk size); any other region in chunks of `chunk_size`."""
    if kind == ARGUMENTS:
        return 1 if size else 0
    return -(-size // chunk_size)


def regular_file(path: Path) -> Path:
    """path, if it is a regular file (a FIFO or a device would block or never
    end a read); RecordDBError otherwise. A missing file is left to the read."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise RecordDBError(f"{path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise RecordDBError(f"{path}: not a regular file (the database is damaged)")
    return path



def native():
    from mneme_cc import _native

    return _native


@dataclass
class Region:
    """One region of a snapshot: an allocation, a global, the arguments or an image."""

    kind: int
    name: str
    address: int
    size: int
    chunk_size: int
    chunks: dict[int, str]  # chunk index -> content hash
    _db: ChunkStore = field(repr=False)
    _base: Region | None = field(default=None, repr=False)  # an epilogue's prologue

    @property
    def kind_name(self) -> str:
        return KIND_NAMES.get(self.kind, str(self.kind))

    @property
    def changed_bytes(self) -> int:
        """Bytes in the chunks this region lists (an epilogue lists changed ones only)."""
        return sum(self.chunk_length(i) for i in self.chunks)

    def chunk_length(self, index: int) -> int:
        """The bytes chunk `index` holds: the arguments' one chunk all of
        them, any other region's a chunk's size, or what is left at its end."""
        if chunk_count(self.kind, self.size, self.chunk_size) == 1:
            return self.size
        return min(self.chunk_size, self.size - index * self.chunk_size)

    @property
    def lists_changes(self) -> bool:
        """An epilogue's region: it lists the chunks that differ from its
        prologue's, which holds the rest."""
        return self._base is not None

    def read(self) -> np.ndarray:
        """The region's bytes as a uint8 array (an epilogue's: prologue plus changes)."""
        # The base builds a fresh array: the changes go straight into it.
        if self._base is not None:
            out = self._base.read()
        else:
            try:
                out = np.empty(self.size, np.uint8)
            except (MemoryError, ValueError):
                raise RecordDBError(f"the {self.kind_name} at {self.address:#x} is "
                                    f"{self.size} bytes, more than this machine can hold "
                                    "in memory") from None
        for start, length, piece in self.placed_chunks():
            if isinstance(piece, int):
                out[start:start + length] = out[piece:piece + length]
            else:
                out[start:start + length] = np.frombuffer(piece, np.uint8)
        return out

    def placed_chunks(self) -> Iterator[tuple[int, int, bytes | int]]:
        """For each chunk the region lists (an epilogue: its changes only), in
        the order listed: (where it starts, its length, its bytes), or for a chunk
        listed before (a buffer of zeros, a repeated pattern) (where it starts,
        its length, where its first copy starts). Each distinct chunk is read,
        decompressed and checked once, on a few threads (`read_chunks`)."""
        distinct = list(dict.fromkeys(self.chunks.values()))
        threads = READ_THREADS
        ahead = min(2 * threads, max(1, READ_AHEAD_BYTES // max(self.chunk_size, 1)))
        reads = read_chunks(self._db, distinct, threads, ahead)
        first: dict[str, tuple[int, int]] = {}  # digest -> (start, length) where it was put
        try:
            for index, digest in self.chunks.items():
                if digest in first:
                    at, length = first[digest]
                    yield self._placed(index, length), length, at
                    continue
                data = next(reads)
                start = self._placed(index, len(data))
                first[digest] = (start, len(data))
                yield start, len(data), data
        finally:
            reads.close()

    def _placed(self, index: int, length: int) -> int:
        """Where chunk `index` of `length` bytes starts; RecordDBError where
        the region has no such chunk (a damaged or forged snapshot)."""
        start = index * self.chunk_size
        if start >= self.size or length != self.chunk_length(index):
            raise RecordDBError(
                f"the {self.kind_name} at {self.address:#x} ({self.size} bytes) lists a chunk "
                f"of {length} bytes at index {index}, which it cannot hold: the database is "
                "damaged (record the instance again)")
        return start

    def array(self, dtype) -> np.ndarray:
        """The region's bytes viewed as dtype (trailing bytes that do not fill one are dropped)."""
        data = self.read()
        itemsize = np.dtype(dtype).itemsize
        return data[: len(data) // itemsize * itemsize].view(dtype)


def _region_problem(raw: dict, chunks: dict, count: int, base, prior) -> str | None:
    """What is wrong with a snapshot's region as stored (None: nothing):
    `count` chunks hold it; an epilogue (`base`, its prologue) lists only
    changed ones, of a region its prologue has (`prior`)."""
    if len(chunks) != len(raw["chunks"]):
        return "lists a chunk twice"
    if any(i >= count for i in chunks):
        return "lists a chunk past its end"
    if base is not None and (prior is None or prior.size != raw["size"]):
        return "is not in the prologue, or not of its size"
    if base is None and len(chunks) != count:
        return "lacks some of its chunks"
    return None


class Snapshot:
    """A prologue or epilogue: the regions of device state around one launch."""

    def __init__(self, db: ChunkStore, path: Path, base: Snapshot | None = None,
                 kind: int | None = None):
        """The snapshot in `path`, checked for what its reads rely on: `kind`
        (PROLOGUE, EPILOGUE, IMAGE_STATE) if given; each region's chunks
        within it, once each, every one of them unless `base` (a prologue)
        holds the rest; an epilogue's regions those of its prologue."""
        try:
            raw = native().read_state(str(regular_file(path)))
        except ValueError as exc:
            raise RecordDBError(str(exc)) from None
        except RuntimeError as exc:  # its metadata or a name is not UTF-8
            raise RecordDBError(f"{path}: unreadable ({exc}; the database is damaged)") from None
        self.path = path
        self.kind = raw["kind"]
        self.chunk_size = raw["chunk_size"]
        if kind is not None and self.kind != kind:
            raise RecordDBError(f"{path}: a {SNAPSHOT_KINDS.get(self.kind, self.kind)} "
                                f"snapshot where a {SNAPSHOT_KINDS[kind]} belongs (the "
                                "database is damaged)")
        try:
            self.metadata = json.loads(raw["metadata"]) if raw["metadata"] else {}
        except (ValueError, RecursionError):
            self.metadata = None
        if not isinstance(self.metadata, dict):
            raise RecordDBError(f"{path}: its description is not a JSON object (the database "
                                "is damaged)")
        self.regions: list[Region] = []
        for r in raw["regions"]:
            chunks = dict(r["chunks"])
            count = chunk_count(r["kind"], r["size"], self.chunk_size)
            prior = base._by_key.get((r["address"], r["kind"], r["name"])) if base else None
            if problem := _region_problem(r, chunks, count, base, prior):
                what = KIND_NAMES.get(r["kind"], str(r["kind"]))
                raise RecordDBError(f"{path}: the {what} at {r['address']:#x} ({r['size']} "
                                    f"bytes) {problem} (the database is damaged)")
            self.regions.append(Region(r["kind"], r["name"], r["address"], r["size"],
                                       self.chunk_size, chunks, db, prior))
        # The first of any that share a key, as a scan finds it; two
        # allocations at one address are never live at once.
        self._by_key: dict[tuple[int, int, str], Region] = {}
        for region in self.regions:
            key = (region.address, region.kind, region.name)
            if region.kind == ALLOCATION and key in self._by_key:
                raise RecordDBError(f"{path}: lists the allocation at {region.address:#x} "
                                    "twice (the database is damaged)")
            self._by_key.setdefault(key, region)

    def region(self, address: int, kind: int | None = None, name: str | None = None) -> Region:
        if kind is not None and name is not None:  # an epilogue's twin: one lookup, not a scan
            if (found := self._by_key.get((address, kind, name))) is not None:
                return found
            raise KeyError(f"no region at {address:#x} in {self.path.name}")
        for r in self.regions:
            if r.address == address and (kind is None or r.kind == kind) and \
                    (name is None or r.name == name):
                return r
        raise KeyError(f"no region at {address:#x} in {self.path.name}")

    def of_kind(self, kind: int) -> list[Region]:
        return [r for r in self.regions if r.kind == kind]

    @property
    def allocations(self) -> list[Region]:
        return self.of_kind(ALLOCATION)

    @property
    def globals(self) -> list[Region]:
        return self.of_kind(GLOBAL)

    def global_named(self, name: str) -> Region:
        for r in self.globals:
            if r.name == name:
                return r
        raise KeyError(f"no global {name} in {self.path.name}")
