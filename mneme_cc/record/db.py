"""Reading a record database: kernels, their recorded instances, snapshots.

    db = RecordDB("rdb")
    for kernel in db.kernels:
        for inst in kernel.instances:
            before = inst.prologue.region(address).read()   # numpy uint8
            after = inst.epilogue.region(address).read()

The on-disk format (docs/record-db.md) is implemented once, in C++
(`runtime/`); this module reaches it through `mneme_cc._native` and adds the
object model.  Snapshot contents are read lazily, chunk by chunk, and every
chunk is verified against its content hash.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from mneme_cc.errors import BinaryFormatError, RecordDBError, UsageError
from mneme_cc.fileio import regular_text
from mneme_cc.record.snapshot import (  # noqa: F401 (the region kinds are part of this face)
    ALLOCATION,
    ARGUMENTS,
    EPILOGUE,
    GLOBAL,
    IMAGE,
    IMAGE_STATE,
    KIND_NAMES,
    PROLOGUE,
    Region,
    Snapshot,
    native,
)

_HASH = re.compile(r"[0-9a-f]{8,64}")


def load_json_object(path: Path) -> dict[str, Any]:
    """A JSON object the database holds; RecordDBError for anything else (a
    link, which could make a damaged database read a file outside it, too)."""
    if path.is_symlink():
        raise RecordDBError(f"{path}: a symbolic link, not a file of the database")
    try:
        found = json.loads(regular_text(path, "a file mneme-cc wrote"))
    except FileNotFoundError:
        raise RecordDBError(f"{path}: missing (the database is incomplete)") from None
    except UsageError as exc:  # not a regular file, or too large
        raise RecordDBError(f"{exc} (the database is damaged)") from None
    except (ValueError, RecursionError) as exc:  # ValueError: JSON, UTF-8, huge integers
        raise RecordDBError(f"{path}: corrupt JSON ({exc})") from None
    if not isinstance(found, dict):
        raise RecordDBError(f"{path}: corrupt JSON (not an object)")
    return found


def refuse_links_out(path: Path) -> None:
    """Before writing into the database at `path`: its `chunks` and `index`
    directories, and each chunk shard, must be its own, not links that
    would take the writes elsewhere."""
    chunks = path / "chunks"
    linked = [d for d in (chunks, path / "index") if d.is_symlink()]
    if not linked and chunks.is_dir():
        linked = [Path(e.path) for e in os.scandir(chunks) if e.is_symlink()]
    if linked:
        raise RecordDBError(f"{linked[0]}: a link out of the database, which mneme-cc does "
                            "not write through (make it a directory of the database)")


def _inside(db: RecordDB, name: Any, where: Path) -> Path:
    """A file the database names, which must be a plain name inside it."""
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or \
            "\0" in name or name in (".", "..") or (db.path / name).is_symlink():
        raise RecordDBError(f"{where}: names the file {name!r}, which is not a file of the "
                            "database (the entry is corrupt)")
    return db.path / name


class Instance:
    """One recorded launch of a kernel."""

    def __init__(self, db: RecordDB, entry: dict[str, Any], path: Path):
        self.db, self.entry, self.path = db, entry, path
        try:
            self._read(entry)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RecordDBError(f"{path}: malformed index entry ({type(exc).__name__}: {exc}); "
                                "the database is damaged") from None

    def _read(self, entry: dict[str, Any]) -> None:
        path = self.path
        self.kernel_name: str = entry["kernel"]
        self.demangled: str = entry.get("demangled", self.kernel_name)
        self.static_hash: str = entry["static_hash"]
        self.dynamic_hash: str = entry["dynamic_hash"]
        for what in ("static_hash", "dynamic_hash"):
            if not isinstance(entry[what], str) or not _HASH.fullmatch(entry[what]):
                raise RecordDBError(f"{path}: '{what}' is not a hex hash (the index entry "
                                    "is corrupt)")
        launch = entry["launch"]
        self.grid = tuple(launch["grid"])
        self.block = tuple(launch["block"])
        self.cluster = tuple(launch["cluster"]) if launch.get("cluster") else None
        self.shared_mem_bytes: int = launch["shared_mem_bytes"]
        self.cooperative: bool = launch["cooperative"]
        self.api: str = launch["api"]
        self.params: list[dict[str, int]] = entry["params"]
        self.args: bytes = bytes.fromhex(entry["args_hex"])
        self.replayable: bool = entry["replayable"]
        self.reasons: list[str] = entry["reasons"]
        self.in_app_ms: float = entry["in_app_ms"]
        self.raw_bytes: int = entry["raw_bytes"]
        self.stored_bytes: int = entry["stored_bytes"]
        self.window: dict[str, int] = entry["window"]
        self.device: dict[str, Any] = entry["device"]
        self.process: dict[str, Any] = entry["process"]
        self.launch_index: int = entry["launch_index"]
        for dims in (self.grid, self.block):
            if len(dims) != 3 or not all(isinstance(d, int) and d > 0 for d in dims):
                raise ValueError("grid and block are three positive integers")
        if not all(isinstance(p, dict) and isinstance(p.get("offset"), int)
                   and isinstance(p.get("size"), int) for p in self.params):
            raise ValueError("every parameter has an integer offset and size")
        if not all(isinstance(self.window.get(k), int) for k in ("base", "size", "granularity")):
            raise ValueError("the window has an integer base, size and granularity")
        for state in ("prologue", "epilogue"):
            _inside(self.db, entry[state], path)
        numbers = {"in_app_ms": (int, float), "raw_bytes": int, "stored_bytes": int,
                   "launch_index": int}
        for key, kind in numbers.items():
            value = entry[key]
            if not isinstance(value, kind) or isinstance(value, bool) or \
                    not 0 <= value < 2**63:  # also NaN, which compares false
                raise ValueError(f"'{key}' is not a number from 0 to 2^63")
        if not all(0 <= self.window[k] < 2**64 for k in ("base", "size", "granularity")):
            raise ValueError("the window's base, size and granularity are 64-bit addresses")
        if not all(0 <= p["offset"] and 0 <= p["size"] and
                   p["offset"] + p["size"] <= len(self.args) for p in self.params):
            raise ValueError("a parameter lies outside the recorded arguments")
        if not isinstance(self.replayable, bool) or not isinstance(self.cooperative, bool):
            raise ValueError("'replayable' and 'launch.cooperative' are true or false")
        if not isinstance(self.shared_mem_bytes, int) or not isinstance(self.kernel_name, str) \
                or not isinstance(self.demangled, str):
            raise ValueError("'kernel', 'demangled' or 'shared_mem_bytes' has the wrong type")
        if not isinstance(self.reasons, list) or not all(isinstance(r, str) for r in self.reasons):
            raise ValueError("'reasons' is not a list of strings")
        if not all(isinstance(self.device.get(k), str) for k in ("arch", "name")) or \
                not isinstance(self.api, str):
            raise ValueError("'device.arch', 'device.name' or 'launch.api' is not a string")

    @property
    def name(self) -> str:
        return f"{self.static_hash}.{self.dynamic_hash}"

    @property
    def fidelity_path(self) -> Path:
        """`fidelity/<instance>.json`: what replay found out about this
        instance's determinism (mneme_cc.replay.judging.nondeterminism)."""
        return self.db.path / "fidelity" / f"{self.name}.json"

    def fidelity(self) -> dict[str, Any] | None:
        """The fidelity file's object, None when there is none."""
        path = self.fidelity_path
        try:
            data = json.loads(regular_text(path, "a fidelity file"))
        except FileNotFoundError:
            return None
        except (UsageError, ValueError, RecursionError) as exc:
            raise RecordDBError(f"{path}: unreadable ({exc}); delete it and replay again") \
                from None
        if not isinstance(data, dict):
            raise RecordDBError(f"{path}: not a JSON object; delete it and replay again")
        return data

    @property
    def module(self):
        """The instance's kernel module through llvmlite (see RecordedKernel.module)."""
        return self.db.kernel(self.static_hash).module

    def arg(self, index: int) -> bytes:
        p = self.params[index]
        return self.args[p["offset"]:p["offset"] + p["size"]]

    def arg_as(self, index: int, dtype) -> Any:
        return np.frombuffer(self.arg(index), dtype)[0]

    def scalar_params(self) -> tuple[int, ...]:
        """Parameters holding a value rather than a pointer into the recorded window."""
        base, size = self.window["base"], self.window["size"]
        out = []
        for i, p in enumerate(self.params):
            if p["size"] == 8 and base <= int(self.arg_as(i, np.uint64)) < base + size:
                continue
            if p["size"] in (1, 2, 4, 8):
                out.append(i)
        return tuple(out)

    @functools.cached_property
    def prologue(self) -> Snapshot:
        return Snapshot(self.db, _inside(self.db, self.entry["prologue"], self.path),
                        kind=PROLOGUE)

    @functools.cached_property
    def epilogue(self) -> Snapshot:
        return Snapshot(self.db, _inside(self.db, self.entry["epilogue"], self.path),
                        base=self.prologue, kind=EPILOGUE)

    def verify(self) -> None:
        """Reads every byte of both snapshots, checking every checksum; raises on damage."""
        described = self.prologue.metadata
        for key in ("kernel", "static_hash", "dynamic_hash", "args_hex", "launch"):
            if described.get(key) != self.entry.get(key):
                raise RecordDBError(f"{self.path}: disagrees with {self.entry['prologue']} "
                                    f"on '{key}' (the index entry is corrupt)")
        for snapshot in (self.prologue, self.epilogue):
            for region in snapshot.regions:
                region.read()


class RecordedKernel:
    """A recorded kernel: its code (IR, the application's image) and instances."""

    def __init__(self, db: RecordDB, static_hash: str, instances: list[Instance]):
        self.db = db
        self.static_hash = static_hash
        self.path = db.path / f"{static_hash}.json"
        self.description = load_json_object(self.path)
        try:
            self.name: str = self.description["name"]
            self.demangled: str = self.description["demangled"]
            self.has_ir: bool = bool(self.description["has_ir"])
            self.params: list[dict[str, int]] = list(self.description["params"])
            self.globals: list[dict[str, Any]] = list(self.description["globals"])
            if not all(isinstance(p, dict) and isinstance(p.get("offset"), int)
                       and isinstance(p.get("size"), int) for p in self.params):
                raise TypeError("'params' is not a list of offsets and sizes")
            if not all(isinstance(g, dict) and isinstance(g.get("name"), str)
                       and isinstance(g.get("size"), int)
                       and isinstance(g.get("constant", False), bool) for g in self.globals):
                raise TypeError("'globals' is not a list of names and sizes")
            if not isinstance(self.name, str) or not isinstance(self.demangled, str):
                raise TypeError("'name' and 'demangled' are strings")
            for key in ("ir", "image"):
                part = self.description.get(key)
                if part is not None and (not isinstance(part, dict) or "file" not in part):
                    raise TypeError(f"'{key}' is not an object naming a file")
            ir = self.description.get("ir")
            if ir is not None and (not isinstance(ir.get("metadata"), dict) or
                                   not isinstance(ir.get("content_hash"), str)):
                raise TypeError("'ir' lacks its metadata object or its content hash")
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordDBError(f"{self.path}: malformed kernel description "
                                f"({type(exc).__name__}: {exc}); the database is damaged") \
                from None
        self._bitcode: bytes | None = None
        self.instances = sorted(instances, key=lambda i: i.launch_index)

    @property
    def ir_metadata(self) -> dict[str, Any] | None:
        ir = self.description.get("ir")
        return ir["metadata"] if ir else None

    @property
    def ir_path(self) -> Path | None:
        ir = self.description.get("ir")
        return _inside(self.db, ir["file"], self.path) if ir else None

    def bitcode(self) -> bytes:
        """The kernel's module as LLVM bitcode, verified against its recorded hash
        (read once: every replay asks for it, most find the compile cache warm)."""
        if self._bitcode is not None:
            return self._bitcode
        ir = self.description.get("ir")
        if not ir:
            raise RecordDBError(f"{self.demangled} carries no IR: the application was not "
                                "built with mneme-cc; replay it with its original binary")
        path = _inside(self.db, ir["file"], self.path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise RecordDBError(f"{path}: missing (the database is incomplete)") from None
        if native().content_hash(data) != ir["content_hash"]:
            raise RecordDBError(f"{path}: corrupt (content hash mismatch)")
        self._bitcode = data
        return data

    @functools.cached_property
    def module(self):
        """The kernel's device module as an llvmlite ModuleRef, for analysis
        (`module.get_function(kernel.name).blocks`, `.instructions`, ...)."""
        import llvmlite.binding as llvm

        try:
            return llvm.parse_bitcode(self.bitcode())
        except RuntimeError as exc:
            raise RecordDBError(f"{self.ir_path}: LLVM cannot read it ({exc})") from None

    def image(self) -> bytes | None:
        """The application's own compiled image (a fatbinary), if it was stored."""
        image = self.description.get("image")
        if not image:
            return None
        snap = Snapshot(self.db, _inside(self.db, image["file"], self.path), kind=IMAGE_STATE)
        if len(snap.regions) != 1:
            raise RecordDBError(f"{snap.path}: {len(snap.regions)} regions where an image "
                                "holds one (the database is damaged)")
        return snap.regions[0].read().tobytes()

    @functools.cached_property
    def device_images(self) -> list:
        """The PTX and cubins of the application's image (mneme_cc.drivers.fatbinary)."""
        from mneme_cc.drivers.fatbinary import images_of

        image = self.image()
        if image is None:
            return []
        try:
            return images_of(image, str(self.path))
        except BinaryFormatError as exc:
            raise RecordDBError(f"{self.path}: the stored image: {exc}") from None

    @property
    def device_arch(self) -> int:
        """The compute capability the kernel was recorded on (90 for sm_90)."""
        arch = self.instances[0].device["arch"] if self.instances else "sm_0"
        digits = "".join(c for c in arch.removeprefix("sm_") if c.isdigit())
        return int(digits or 0)

    @functools.cached_property
    def provenance(self) -> str:
        """What the kernel carries, which decides what can be tuned: `ir`
        (built by mneme-cc: everything), `ptx` (ptxas options, launch bounds
        and geometry), `cubin` (launch geometry only)."""
        if self.has_ir:
            return "ir"
        from mneme_cc.drivers.fatbinary import provenance

        return provenance(self.device_images, self.name, self.device_arch)

    def ptx_image(self):
        """The PTX the application carries for this kernel that runs on the
        recorded device (the newest arch at or below it), or None."""
        from mneme_cc.drivers.fatbinary import image_for

        return image_for(self.device_images, self.name, self.device_arch, "ptx")

    @property
    def replay_note(self) -> str:
        if self.has_ir:
            return "carries IR: replayable and tunable from it"
        if self.provenance == "ptx":
            return (f"carries PTX ({self.ptx_image().arch_name}), no IR: tunable on ptxas "
                    "options, launch bounds and geometry")
        return "carries a cubin only: replayable with its image, tunable on launch geometry"


def require_database(path: Path) -> Path:
    """path's database.json, if path is a record database's directory (of any
    format version); RecordDBError, in one line, if it is not."""
    if not path.exists():
        raise RecordDBError(f"{path}: no such record database "
                            f"(record one with `mneme record -rdb {path} -- APP`)")
    if not path.is_dir():
        raise RecordDBError(f"{path}: not a record database (a record database is a "
                            "directory that `mneme record -rdb DIR` writes)")
    marker = path / "database.json"
    if not marker.exists():
        raise RecordDBError(f"{path}: not a record database (no database.json)")
    return marker


class RecordDB:
    """A record database directory, as `mneme record -rdb DIR` writes it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        marker = require_database(self.path)
        info = load_json_object(marker)
        version = info.get("version")
        if info.get("format") != "mneme-record-db" or version != native().STORE_FORMAT_VERSION:
            raise RecordDBError(f"{marker}: record database format {info.get('format')} "
                                f"version {version}; this mneme-cc reads version "
                                f"{native().STORE_FORMAT_VERSION}")
        for part in ("index", "chunks"):  # a file there would read as an empty database
            if (self.path / part).exists() and not (self.path / part).is_dir():
                raise RecordDBError(f"{self.path / part}: not a directory (the database is "
                                    "damaged)")

    def read_chunk(self, digest: str) -> bytes:
        try:
            return native().read_chunk(str(self.path), digest)
        except ValueError as exc:
            raise RecordDBError(str(exc)) from None

    @functools.cached_property
    def instances(self) -> list[Instance]:
        out = []
        for entry_path in sorted((self.path / "index").glob("*.json")):
            out.append(Instance(self, load_json_object(entry_path), entry_path))
        return out

    @functools.cached_property
    def kernels(self) -> list[RecordedKernel]:
        by_static: dict[str, list[Instance]] = {}
        for inst in self.instances:
            by_static.setdefault(inst.static_hash, []).append(inst)
        kernels = [RecordedKernel(self, s, insts) for s, insts in by_static.items()]
        return sorted(kernels, key=lambda k: k.demangled)

    def kernel(self, key: str) -> RecordedKernel:
        """A kernel by static hash, mangled name or demangled name."""
        matches = [k for k in self.kernels if key in (k.static_hash, k.name, k.demangled)]
        if not matches:
            matches = [k for k in self.kernels if k.demangled.startswith(key + "(")]
        if len(matches) != 1:
            what = "no kernel" if not matches else f"{len(matches)} kernels"
            raise RecordDBError(f"{what} in {self.path} match '{key}' "
                                "(`mneme ls` lists them; give a static hash)")
        return matches[0]

    def find(self, rid: str | None = None, kernel: str | None = None,
             static: str | None = None) -> Instance:
        """The one instance the caller means: by id (`<static>.<dynamic>` or the dynamic
        hash), by kernel (static hash or name), or the database's only instance."""
        candidates = self.instances
        if static:
            candidates = [i for i in candidates if i.static_hash == static]
        if kernel:
            wanted = self.kernel(kernel)
            candidates = [i for i in candidates if i.static_hash == wanted.static_hash]
        if rid:
            candidates = [i for i in candidates if rid in (i.name, i.dynamic_hash)]
        if len(candidates) != 1:
            what = "no instance" if not candidates else f"{len(candidates)} instances"
            raise RecordDBError(f"{what} in {self.path} match; choose one with -rid "
                                "(`mneme ls` lists them)")
        return candidates[0]

    @property
    def incomplete(self) -> list[str]:
        """Instances that were claimed but never completed (in flight, or the recorder died)."""
        return sorted(p.name[: -len(".claim")] for p in (self.path / "index").glob("*.claim")
                      if not p.with_suffix(".json").exists())

    def verify(self) -> None:
        for kernel in self.kernels:
            if kernel.has_ir:
                kernel.bitcode()
            kernel.image()
            for inst in kernel.instances:
                inst.verify()
