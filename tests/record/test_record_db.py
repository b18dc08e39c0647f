"""CPU tier: the snapshot store, the record database, `mneme record/ls/show` errors.

The format code is the C++ in runtime/ (the recorder writes with it);
these tests reach it through mneme_cc._native.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import run, tool_env
from synthetic_db import make_database

from mneme_cc import _native
from mneme_cc.build_info import build_info
from mneme_cc.errors import RecordDBError
from mneme_cc.record.db import RecordDB

M64 = (1 << 64) - 1
K1, K2, K3 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9


def fmix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    return x ^ (x >> 33)


def reference_hash(data: bytes) -> str:
    """The content hash as docs/record-db.md specifies it, written independently."""
    padded = data + bytes(-len(data) % 8)
    lo = hi = 0
    for i in range(len(padded) // 8):
        w = int.from_bytes(padded[8 * i:8 * i + 8], "little")
        lo = (lo + fmix64((w + (i + 1) * K1) & M64)) & M64
        rot = ((w << 29) | (w >> 35)) & M64
        hi = (hi + fmix64(rot ^ (((i + 1) * K2) & M64))) & M64
    n = len(data)
    d_lo = fmix64(lo ^ ((n * K3) & M64) ^ K2)
    d_hi = fmix64((hi + d_lo + n) & M64)
    return f"{d_hi:016x}{d_lo:016x}"


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 255, 4096, 4096 * 3 + 5])
def test_content_hash_matches_the_spec(size):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    assert _native.content_hash(data) == reference_hash(data)


def test_content_hash_separates_near_misses():
    base = bytes(4096)
    seen = {_native.content_hash(base), _native.content_hash(base + b"\0")}
    for i in range(0, 4096, 97):  # one flipped bit anywhere, and one swapped pair
        flipped = bytearray(base)
        flipped[i] ^= 1
        seen.add(_native.content_hash(bytes(flipped)))
    swapped = bytearray(range(256)) * 16
    swapped[0:8], swapped[8:16] = swapped[8:16], swapped[0:8]
    seen.add(_native.content_hash(bytes(swapped)))
    seen.add(_native.content_hash(bytes(bytearray(range(256)) * 16)))
    assert len(seen) == 2 + len(range(0, 4096, 97)) + 2


def chunk_files(db: Path) -> list[Path]:
    return sorted(p for p in (db / "chunks").rglob("*") if p.is_file())


def test_chunks_round_trip_and_deduplicate(tmp_path):
    rng = np.random.default_rng(1)
    noise = rng.integers(0, 256, 100000, dtype=np.uint8).tobytes()  # stays raw
    zeros = bytes(1 << 20)                                           # compresses
    h_noise, stored_noise = _native.write_chunk(str(tmp_path), noise, 1)
    h_zeros, stored_zeros = _native.write_chunk(str(tmp_path), zeros, 1)
    assert stored_noise >= len(noise) and stored_zeros < 1000
    assert _native.read_chunk(str(tmp_path), h_noise) == noise
    assert _native.read_chunk(str(tmp_path), h_zeros) == zeros
    # Stored once, whoever writes it again.
    assert _native.write_chunk(str(tmp_path), zeros, 1) == (h_zeros, 0)
    assert len(chunk_files(tmp_path)) == 2
    assert chunk_files(tmp_path)[0].parent.name == chunk_files(tmp_path)[0].name[:2]


def test_a_flipped_byte_is_named(tmp_path):
    data = np.arange(50000, dtype=np.uint32).tobytes()
    digest, _ = _native.write_chunk(str(tmp_path), data, 1)
    (path,) = chunk_files(tmp_path)
    for offset in (10, 30, 60, path.stat().st_size - 1):  # header fields and payload
        good = path.read_bytes()
        bad = bytearray(good)
        bad[offset] ^= 0x40
        path.write_bytes(bytes(bad))
        with pytest.raises(ValueError, match=str(path)):
            _native.read_chunk(str(tmp_path), digest)
        path.write_bytes(good)
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(ValueError, match="truncated"):
        _native.read_chunk(str(tmp_path), digest)
    path.unlink()
    with pytest.raises(ValueError, match="cannot read"):
        _native.read_chunk(str(tmp_path), digest)


def sample_state():
    return {"kind": 1, "chunk_size": 4096, "metadata": json.dumps({"kernel": "k"}),
            "regions": [{"kind": 0, "name": "", "address": 0x200000000000, "size": 10000,
                         "chunks": [(0, "0" * 31 + "1"), (1, "ab" * 16), (2, "f" * 32)]},
                        {"kind": 1, "name": "c_weights", "address": 0x7f00, "size": 28,
                         "chunks": [(0, "12" * 16)]},
                        {"kind": 2, "name": "arguments", "address": 0, "size": 0, "chunks": []}]}


def test_state_round_trip_and_damage(tmp_path):
    state = sample_state()
    data = _native.encode_state(state)
    decoded = _native.decode_state(data)
    assert decoded["regions"] == [{**r, "chunks": list(r["chunks"])} for r in state["regions"]]
    assert decoded["metadata"] == state["metadata"] and decoded["chunk_size"] == 4096
    path = tmp_path / "DeviceState.prologue.a.b.mneme"
    for offset in (40, len(data) // 2, len(data) - 1):
        bad = bytearray(data)
        bad[offset] ^= 1
        path.write_bytes(bytes(bad))
        with pytest.raises(ValueError, match=f"{path}: corrupt"):
            _native.read_state(str(path))
    path.write_bytes(data[:-9])
    with pytest.raises(ValueError, match="truncated"):
        _native.read_state(str(path))
    newer = bytearray(data)
    newer[8] = 2  # the format version
    path.write_bytes(bytes(newer))
    with pytest.raises(ValueError, match="format version 2"):
        _native.read_state(str(path))
    path.write_bytes(b"not a state file at all, just text....")
    with pytest.raises(ValueError, match="bad magic"):
        _native.read_state(str(path))


def _writer(db: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for i in range(60):
        shared = np.full(20000, i, np.uint32).tobytes()       # every writer stores these
        own = rng.integers(0, 1 << 32, 5000, dtype=np.uint32).tobytes()
        for data in (shared, own):
            digest, _ = _native.write_chunk(db, data, 1)
            assert _native.read_chunk(db, digest) == data


def test_concurrent_writers_share_one_store(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), seed)) for seed in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0] * 4
    files = chunk_files(tmp_path)
    assert len(files) == 60 + 4 * 60                # shared chunks stored once
    assert not [f for f in files if ".tmp." in f.name]
    for f in files:
        _native.read_chunk(str(tmp_path), f.name)   # every one whole


def _write_beside_same_pid_temporaries(db: str) -> None:
    """As if a process of the same pid on another host were writing the
    same chunk: its temporaries are there first, and stay its own."""
    import os

    data = bytes(range(256)) * 64
    path = Path(db) / "chunks" / _native.content_hash(data)[:2] / _native.content_hash(data)
    path.parent.mkdir(parents=True)
    theirs = [path.with_name(f"{path.name}.tmp.{os.getpid()}.{n}") for n in range(8)]
    for t in theirs:
        t.write_bytes(b"another host's bytes")
    digest, _ = _native.write_chunk(db, data, 1)
    assert _native.read_chunk(db, digest) == data
    assert [t.read_bytes() for t in theirs] == [b"another host's bytes"] * 8


def test_a_temporary_is_never_shared(tmp_path):
    _native.init_database(str(tmp_path))
    ctx = multiprocessing.get_context("spawn")  # a fresh process: its first temporaries
    p = ctx.Process(target=_write_beside_same_pid_temporaries, args=(str(tmp_path),))
    p.start()
    p.join()
    assert p.exitcode == 0


def _rewrite(path: str, fill: int) -> None:
    for _ in range(300):
        _native.write_file_atomic(path, bytes([fill]) * 200000)


def test_index_files_are_replaced_atomically(tmp_path):
    path = tmp_path / "index.json"
    _native.write_file_atomic(str(path), bytes([0]) * 200000)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_rewrite, args=(str(path), fill)) for fill in (1, 2, 3)]
    for p in procs:
        p.start()
    seen = set()
    while any(p.is_alive() for p in procs):
        data = path.read_bytes()
        assert len(data) == 200000 and len(set(data)) == 1  # never a mix, never short
        seen.add(data[0])
    for p in procs:
        p.join()
    assert not [f for f in tmp_path.iterdir() if ".tmp." in f.name]
    # Exclusive writes keep the first file.
    assert _native.write_file_atomic(str(tmp_path / "k.json"), b"first", exclusive=True) is None
    _native.write_file_atomic(str(tmp_path / "k.json"), b"second", exclusive=True)
    assert (tmp_path / "k.json").read_bytes() == b"first"


@pytest.fixture
def synthetic(tmp_path):
    n = 3000
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 0.5, np.float32)
    entry = make_database(tmp_path / "db", a, b, a + b)
    return tmp_path / "db", a, b, entry


def test_a_chunk_a_region_lists_many_times_is_read_once(tmp_path):
    """A buffer of zeros, or a repeated pattern, lists one chunk at many
    indices: it is read (decompressed, checked) once and copied, and the
    region reads as chunk by chunk, an epilogue's changes over its prologue."""
    from mneme_cc.record.snapshot import ALLOCATION, ARGUMENTS, Region

    db = str(tmp_path / "db")
    _native.init_database(db)
    chunk = 4096
    zeros = _native.write_chunk(db, bytes(chunk), 1)[0]
    ramp = _native.write_chunk(db, bytes(range(256)) * (chunk // 256), 1)[0]
    tail = _native.write_chunk(db, b"\x07" * 100, 1)[0]

    class Counting:
        def __init__(self):
            self.reads: list[str] = []

        def read_chunk(self, digest):
            self.reads.append(digest)
            return _native.read_chunk(db, digest)

    store = Counting()
    listed = {0: zeros, 1: ramp, 2: zeros, 3: ramp, 4: zeros, 5: tail}
    prologue = Region(ALLOCATION, "", 0x1000, 5 * chunk + 100, chunk, listed, store)
    expected = bytes(chunk) + bytes(range(256)) * 16 + bytes(chunk) + \
        bytes(range(256)) * 16 + bytes(chunk) + b"\x07" * 100
    assert prologue.read().tobytes() == expected
    assert sorted(store.reads) == sorted([zeros, ramp, tail])
    store.reads.clear()
    epilogue = Region(ALLOCATION, "", 0x1000, 5 * chunk + 100, chunk, {2: ramp, 4: ramp},
                      store, prologue)
    changed = expected[:2 * chunk] + expected[chunk:2 * chunk] + expected[3 * chunk:4 * chunk] \
        + expected[chunk:2 * chunk] + expected[5 * chunk:]
    assert epilogue.read().tobytes() == changed
    assert store.reads.count(ramp) == 2  # once for the prologue, once for the changes
    # The arguments are one chunk whatever their size (up to 32 KiB, past a 4 KiB chunk).
    args = bytes(range(256)) * 20
    packed = _native.write_chunk(db, args, 1)[0]
    arguments = Region(ARGUMENTS, "arguments", 0, len(args), chunk, {0: packed}, store)
    assert arguments.read().tobytes() == args
    # A snapshot listing a chunk its region cannot hold is damaged: said, not a traceback.
    for listed, size in (({5: zeros}, 2 * chunk), ({0: zeros}, 100),
                         ({0: zeros, 1: zeros}, chunk + 100)):  # a repeat too long at the end
        with pytest.raises(RecordDBError, match="cannot hold: the database is damaged"):
            Region(ALLOCATION, "", 0x1000, size, chunk, listed, store).read()



def test_chunks_are_read_on_threads_in_order_with_a_bounded_read_ahead(tmp_path):
    """A region's chunks are read on several threads at once (the native
    read lets go of the interpreter's lock), handed over in order, never
    more than `ahead` ahead of the reader; a reader that stops early leaves
    the reads not yet started unread; each listed chunk is placed, a repeat
    by where its first copy went."""
    import threading
    import time

    from mneme_cc.record.snapshot import ALLOCATION, Region, read_chunks

    db = str(tmp_path / "db")
    _native.init_database(db)
    chunk = 4096
    rng = np.random.default_rng(3)
    payloads = [rng.integers(0, 16, chunk, dtype=np.uint8).tobytes() for _ in range(40)]
    digests = [_native.write_chunk(db, p, 1)[0] for p in payloads]

    class Gated:
        """Each chunk's read waits until its gate opens (all open unless closed)."""

        def __init__(self, closed=()):
            self.lock = threading.Lock()
            self.started: list[int] = []
            self.threads: set[int] = set()
            self.gates = {d: threading.Event() for d in digests}
            for i, d in enumerate(digests):
                if i not in closed:
                    self.gates[d].set()

        def read_chunk(self, digest):
            with self.lock:
                self.started.append(digests.index(digest))
                self.threads.add(threading.get_ident())
            assert self.gates[digest].wait(10)
            return _native.read_chunk(db, digest)

        def open(self):
            for gate in self.gates.values():
                gate.set()

    def settled():
        time.sleep(0.3)  # what the pool's threads would start by now, they have

    # Two reads at once: the first two wait for each other.
    together = threading.Barrier(2, timeout=10)

    class Together(Gated):
        def read_chunk(self, digest):
            if digest in digests[:2]:
                together.wait()
            return super().read_chunk(digest)

    store = Together()
    assert list(read_chunks(store, digests, threads=4)) == payloads
    assert threading.get_ident() not in store.threads
    # The read-ahead: with the first read held, 8 are asked for, no more.
    store = Gated(closed={0})
    reads = read_chunks(store, digests, threads=4, ahead=8)
    taken: list[bytes] = []
    taker = threading.Thread(target=lambda: taken.append(next(reads)))
    taker.start()
    settled()
    assert sorted(store.started) == list(range(8))
    store.open()
    taker.join(10)
    assert taken == payloads[:1]
    # Stopping early: reads 3..6 running (held), 7..10 asked for but not
    # started; closing leaves those unread.
    store = Gated(closed=set(range(3, 40)))
    reads = read_chunks(store, digests, threads=4, ahead=8)
    assert [next(reads) for _ in range(3)] == payloads[:3]
    settled()
    assert sorted(store.started) == list(range(7))
    closer = threading.Thread(target=reads.close)
    closer.start()
    settled()
    store.open()
    closer.join(10)
    assert not closer.is_alive() and sorted(store.started) == list(range(7))
    # One thread: read in the caller's thread.
    store = Gated()
    assert list(read_chunks(store, digests[:5], threads=1)) == payloads[:5]
    assert store.threads == {threading.get_ident()}
    # placed_chunks: (start, length, bytes) for a chunk's first listing, its
    # first start for a repeat; read() builds the region from them.
    listed = {0: digests[0], 1: digests[1], 2: digests[0], 3: digests[2]}
    region = Region(ALLOCATION, "", 0x1000, 4 * chunk, chunk, listed, Gated())
    assert list(region.placed_chunks()) == [(0, chunk, payloads[0]), (chunk, chunk, payloads[1]),
                                            (2 * chunk, chunk, 0),
                                            (3 * chunk, chunk, payloads[2])]
    assert region.read().tobytes() == payloads[0] + payloads[1] + payloads[0] + payloads[2]
    assert not region.lists_changes
    changes = Region(ALLOCATION, "", 0x1000, 4 * chunk, chunk, {1: digests[3]}, Gated(),
                     region)
    assert changes.lists_changes
    assert list(changes.placed_chunks()) == [(chunk, chunk, payloads[3])]
    assert changes.read().tobytes() == payloads[0] + payloads[3] + payloads[0] + payloads[2]

def test_damaged_snapshots_and_entries_are_one_line_errors(tmp_path):
    """What a snapshot's reads rely on is checked as it is opened: a
    prologue lists every chunk of each region, once, within it, and each
    allocation once; an epilogue's regions are its prologue's; each file is of its kind; the
    JSON files hold objects and are regular files."""
    import os

    a = np.arange(3000, dtype=np.float32)

    def damaged(name, change):
        db = tmp_path / name
        entry = make_database(db, a, a, a + a)
        change(db, entry)
        return db

    def restate(which, edit):
        def change(db, entry):
            path = db / entry[which]
            state = _native.decode_state(path.read_bytes())
            edit(state)
            path.write_bytes(_native.encode_state(state))
        return change

    def drop_chunk(state):
        state["regions"][0]["chunks"] = state["regions"][0]["chunks"][1:]

    def twice(state):
        state["regions"][0]["chunks"].append(state["regions"][0]["chunks"][0])

    def moved(state):
        state["regions"][2]["address"] += 0x1000

    def duplicated(state):  # two allocations at one address
        state["regions"].insert(1, dict(state["regions"][0]))

    def swapped(db, entry):
        entry_path = next((db / "index").iterdir())
        described = json.loads(entry_path.read_text())
        described["prologue"], described["epilogue"] = entry["epilogue"], entry["prologue"]
        entry_path.write_text(json.dumps(described))

    def fifo(db, entry):
        path = next((db / "index").iterdir())
        path.unlink()
        os.mkfifo(path)

    def listed(db, entry):
        (db / "database.json").write_text("[]")

    def linked(db, entry):  # an index entry that is a link out of the database
        path = next((db / "index").iterdir())
        outside = db.parent / f"{db.name}-outside.json"
        path.rename(outside)
        path.symlink_to(outside)

    def as_file(part):  # the index or the chunks a file: no longer an empty database
        def change(db, entry):
            shutil.rmtree(db / part)
            (db / part).write_text("")
        return change

    def metadata(state):
        state["metadata"] = "[1, 2]"

    def entry_field(edit):
        def change(db, entry):
            entry_path = next((db / "index").iterdir())
            described = json.loads(entry_path.read_text())
            edit(described)
            entry_path.write_text(json.dumps(described))
        return change

    def long_arguments(state):  # 5 KiB of arguments, one chunk, past the 4 KiB chunk size
        packed = bytes(range(256)) * 20
        digest = _native.write_chunk(str(tmp_path / "long"), packed, 1)[0]
        state["regions"][3].update(size=len(packed), chunks=[(0, digest)])

    db = damaged("long", restate("prologue", long_arguments))
    run(["mneme", "ls", "-rdb", str(db), "--verify"], timeout=60)
    for name, change, says in (
            ("missing", restate("prologue", drop_chunk), "lacks some of its chunks"),
            ("twice", restate("prologue", twice), "lists a chunk twice"),
            ("duplicated", restate("prologue", duplicated), "lists the allocation at 0x"),
            ("moved", restate("epilogue", moved), "is not in the prologue"),
            ("swapped", swapped, "snapshot where a prologue belongs"),
            ("metadata", restate("prologue", metadata), "not a JSON object"),
            ("fifo", fifo, "not a regular file"),
            ("listed", listed, "not an object"),
            ("index", as_file("index"), "index: not a directory"),
            ("linked", linked, "a symbolic link, not a file of the database"),
            ("chunks", as_file("chunks"), "chunks: not a directory"),
            ("replayable", entry_field(lambda e: e.update(replayable="false")), "true or false"),
            ("nan", entry_field(lambda e: e.update(in_app_ms=float("nan"))), "from 0 to 2^63"),
            ("huge", entry_field(lambda e: e.update(raw_bytes=10**400)), "from 0 to 2^63"),
            ("param", entry_field(lambda e: e["params"].append({"offset": 40, "size": 8})),
             "outside the recorded arguments")):
        db = damaged(name, change)
        proc = run(["mneme", "ls", "-rdb", str(db), "--verify"], check=False, timeout=60)
        assert proc.returncode != 0 and says in proc.stderr, (name, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, name


def test_record_db_reads_instances_lazily(synthetic):
    path, a, b, entry = synthetic
    db = RecordDB(path)
    (kernel,) = db.kernels
    assert kernel.demangled.startswith("add(") and kernel.has_ir
    assert kernel.bitcode()[:2] == b"BC"
    (inst,) = kernel.instances
    assert inst.grid == (4, 1, 1) and inst.arg_as(3, np.int32) == 3000
    assert db.kernel("add") is kernel and db.find(rid=inst.dynamic_hash) is inst
    pa, pb, pc = (int(inst.arg_as(k, np.uint64)) for k in range(3))
    assert np.array_equal(inst.prologue.region(pa).array(np.float32), a)
    assert np.array_equal(inst.prologue.region(pc).array(np.float32), np.zeros(3000))
    # The epilogue stores only what changed and reads as the whole region.
    assert not inst.epilogue.region(pa).chunks
    assert np.array_equal(inst.epilogue.region(pa).array(np.float32), a)
    assert np.array_equal(inst.epilogue.region(pc).array(np.float32), a + b)
    db.verify()
    assert db.incomplete == []
    (path / "index" / "00112233445566aa.0000000000000001.claim").write_text("123\n")
    assert RecordDB(path).incomplete == ["00112233445566aa.0000000000000001"]


def test_record_db_damage_is_one_clear_error(synthetic):
    path, *_ = synthetic
    chunk = max(chunk_files(path), key=lambda c: c.stat().st_size)
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0xFF
    chunk.write_bytes(bytes(data))
    with pytest.raises(RecordDBError, match=str(chunk)):
        RecordDB(path).verify()
    proc = run(["mneme", "ls", str(path), "--verify"], check=False)
    assert proc.returncode == 2 and str(chunk) in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    # A damaged index entry, and a missing kernel description.
    entry = next((path / "index").glob("*.json"))
    entry.write_text(entry.read_text()[:-20])
    proc = run(["mneme", "ls", str(path)], check=False)
    assert proc.returncode == 2 and f"{entry}: corrupt JSON" in proc.stderr


def test_ls_and_show(synthetic):
    path, _, _, entry = synthetic
    listing = run(["mneme", "ls", str(path)]).stdout
    assert "1 kernel(s), 1 instance(s)" in listing
    assert "add(float const*, float const*, float*, int)" in listing
    assert entry["dynamic_hash"] in listing and "4x1x1" in listing and "replayable" in listing
    data = json.loads(run(["mneme", "ls", str(path), "--json"]).stdout)
    (kernel,) = data["kernels"]
    assert kernel["instances"][0]["raw_bytes"] == entry["raw_bytes"]
    shown = json.loads(run(["mneme", "show", str(path), entry["dynamic_hash"], "--json"]).stdout)
    assert shown["grid"] == [4, 1, 1] and len(shown["prologue"]) == 4
    assert [r["chunks"] for r in shown["epilogue"]][:2] == [0, 0]
    text = run(["mneme", "show", str(path), "add"]).stdout
    assert entry["static_hash"] in text and "carries IR" in text
    proc = run(["mneme", "show", str(path), "nothing-like-this"], check=False)
    assert proc.returncode == 2 and "no kernel" in proc.stderr
    # A damaged state file of a named instance is said as such.
    prologue = path / entry["prologue"]
    prologue.write_bytes(prologue.read_bytes()[:40])
    proc = run(["mneme", "show", str(path), entry["dynamic_hash"]], check=False)
    assert proc.returncode == 2 and str(prologue) in proc.stderr and "no kernel" not in proc.stderr


def test_ls_and_show_take_rdb_as_every_command_does(synthetic, tmp_path):
    path, _, _, entry = synthetic
    assert run(["mneme", "ls", "-rdb", str(path)]).stdout == run(["mneme", "ls", str(path)]).stdout
    assert run(["mneme", "show", "-rdb", str(path), "add"]).stdout == \
        run(["mneme", "show", str(path), "add"]).stdout
    for argv, message in ((["ls"], "no record database given: mneme ls -rdb DIR"),
                          (["ls", str(tmp_path), "-rdb", str(path)], "two record databases"),
                          (["show", "-rdb", str(path)], "mneme show -rdb DIR KEY"),
                          (["show", "-rdb", str(path), str(path), "add"], "mneme show -rdb DIR KEY")):
        proc = run(["mneme", *argv], check=False)
        assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1


def test_ls_rejects_what_is_not_a_database(tmp_path):
    proc = run(["mneme", "ls", str(tmp_path / "absent")], check=False)
    assert proc.returncode == 2 and "no such record database" in proc.stderr
    proc = run(["mneme", "ls", str(tmp_path)], check=False)
    assert proc.returncode == 2 and "not a record database" in proc.stderr
    (tmp_path / "database.json").write_text('{"format": "mneme-record-db", "version": 9}')
    proc = run(["mneme", "ls", str(tmp_path)], check=False)
    assert proc.returncode == 2 and "version 9" in proc.stderr


@pytest.mark.parametrize("flags, message", [
    (["--kernels", "("], "not a regex the recorder reads"),
    (["--kernels", "(?i)spmv"], "not a regex the recorder reads (ECMAScript)"),
    (["--ranks", "3-1"], "not a rank list"),
    (["--va-base", "0"], "not a user-space address"),
    (["--vass", "99999999T"], "not a size of virtual address space"),
    (["--zstd-level", "99"], "not a zstd level"),
    (["--zstd-level", "-101"], "not a zstd level (-100, fastest, to 19"),
    (["--zstd-level", "- 5"], "not a zstd level"),
    (["--ranks", "0,x"], "not a rank list"),
    (["--vass", "lots"], "not a size"),
    (["--va-base", "0x1234"], "that is a multiple of 2 MiB"),
    (["--max-instances", "0"], "--max-instances must be at least 1"),
    (["--skip", "-1"], "--skip '-1' is not a whole number"),
    (["--chunk-size", "100"], "is not a chunk size"),
    (["--bogus"], "no option --bogus"),
    (["--verbose=yes"], "--verbose takes no value"),
    (["--kernels"], "--kernels needs a value"),
    (["--ranks", "0-99999999999999999999999"], "not a rank list"),
    (["--kernels", "a" * 5000], "is longer than 4096 characters"),
    (["--chunk-size", "16777215T"], "from 4096 to 1G"),
    (["--va-base", "0200000000000"], "that is a multiple of 2 MiB"),  # no octal
    (["--skip", "1\n2"], "--skip '1\\x0a2' is not a whole number"),  # one line
])
def test_record_rejects_bad_flags(tmp_path, flags, message):
    proc = run(["mneme", "record", "-rdb", str(tmp_path / "db"), *flags, "--", "true"],
               check=False)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "db").exists()  # nothing written, nothing run


def test_record_rejects_bad_places_and_programs(tmp_path):
    cases = [
        (["-rdb", "/etc/passwd/db", "--", "true"], "cannot create the record database"),
        (["-rdb", str(tmp_path / "db"), "--", "no-such-program-here"], "no such program"),
        (["-rdb", str(tmp_path / "db")], "no application given"),
        (["--", "true"], "no record database given"),
        (["-rdb", str(tmp_path / "db"), "--", ""], "no application given"),
        (["-rdb", __file__, "--", "true"], "is not a directory"),
    ]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    cases.append((["-rdb", str(tmp_path / "notes"), "--", "true"], "not a record database"))
    for args, message in cases:
        proc = run(["mneme", "record", *args], check=False)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1


def test_record_runs_any_program_unchanged(tmp_path):
    """The recorder is preloaded; a program without CUDA behaves exactly as before."""
    db = tmp_path / "db"
    proc = run(["mneme", "record", "-rdb", str(db), "--", "sh", "-c",
                "echo out; echo err >&2; echo $LD_PRELOAD; exit 3"], check=False)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 3 and lines[0] == "out"
    # The program's stderr, then mneme's own line on why nothing was recorded.
    assert proc.stderr.splitlines()[0] == "err"
    assert proc.stderr.splitlines()[1].startswith("mneme: warning: recorded no instance: ")
    assert lines[1].startswith(str(build_info().recorder))
    assert RecordDB(db).instances == []
    # The user's own preload stays, after the recorder.
    env = tool_env(LD_PRELOAD="libm.so.6")
    out = subprocess.run(["mneme", "record", "-rdb", str(db), "--", "sh", "-c",
                          "echo $LD_PRELOAD"], capture_output=True, text=True, env=env).stdout
    assert out.strip().endswith(":libm.so.6")


def test_record_gives_the_recorder_the_command_line_s_settings(tmp_path):
    """The flags become the recorder's MNEME_* variables; variables of those
    names inherited from the caller do not leak into the recording, others pass."""
    db = tmp_path / "db"
    env = tool_env(MNEME_KERNELS="stale", MNEME_ZSTD_LEVEL="7", MNEME_OTHER="kept")
    proc = subprocess.run(["mneme", "record", "-rdb", str(db), "--skip=2", "--va-base",
                           "0x400000000000", "--chunk-size", "64K", "--ranks", "0,2-3", "-v",
                           "sh", "-c", "env | grep ^MNEME_ | sort"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    recorder_s = {"MNEME_RDB", "MNEME_KERNELS", "MNEME_SKIP", "MNEME_MAX_INSTANCES",
                  "MNEME_VASS", "MNEME_VA_BASE", "MNEME_RANKS", "MNEME_CHUNK_SIZE",
                  "MNEME_ZSTD_LEVEL", "MNEME_VERBOSE", "MNEME_OTHER"}
    seen = dict(line.split("=", 1) for line in proc.stdout.split())
    assert {k: v for k, v in seen.items() if k in recorder_s} == {
        "MNEME_CHUNK_SIZE": "65536", "MNEME_MAX_INSTANCES": "4", "MNEME_OTHER": "kept",
        "MNEME_RANKS": "0,2-3", "MNEME_RDB": str(db.resolve()), "MNEME_SKIP": "2",
        "MNEME_VA_BASE": "0x400000000000", "MNEME_VERBOSE": "1"}


def test_record_takes_zstd_s_fast_levels(tmp_path):
    proc = run(["mneme-record", "-rdb", str(tmp_path / "db"), "--zstd-level", "-5", "--",
                "sh", "-c", "echo $MNEME_ZSTD_LEVEL"])
    assert proc.stdout.strip() == "-5"


def test_recorder_exports_only_cuda_entry_points():
    lib = build_info().recorder
    assert lib is not None and lib.exists()
    symbols = run(["nm", "-D", "--defined-only", str(lib)]).stdout.split()
    exported = {s for s in symbols if not s.startswith("_Z") and s.isidentifier() and len(s) > 2}
    names = {s for s in exported if s.startswith(("cuda", "__cuda", "__mneme"))}
    assert {"cudaMalloc", "cudaFree", "cudaLaunchKernel", "__cudaRegisterFatBinary",
            "__cudaLaunchKernel", "__mneme_register_ir_v1", "__mneme_register_ir_v2"} <= names
    assert not [s for s in symbols if s.startswith("_ZN")]  # no C++ symbols leak


def test_instance_module_is_the_kernels_ir(synthetic, tmp_path):
    """`inst.module`: the recorded IR through llvmlite, for analysis."""
    from mneme_cc.drivers.embedded import read_embedded_modules

    path, *_ = synthetic
    obj = tmp_path / "add.o"
    source = tmp_path / "add.cu"
    source.write_text("__global__ void add(const float *a, const float *b, float *c, int n)"
                      " { int i = threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n")
    run(["mneme-cxx", "-O2", "-c", str(source), "-o", str(obj)])
    (module,) = read_embedded_modules(obj)
    (path / "RecordedIR_00112233445566aa.bc").write_bytes(module.bitcode)
    kernel_json = path / "00112233445566aa.json"
    description = json.loads(kernel_json.read_text())
    description["ir"]["content_hash"] = _native.content_hash(module.bitcode)
    kernel_json.write_text(json.dumps(description))
    (inst,) = RecordDB(path).instances
    function = inst.module.get_function("_Z3addPKfS0_Pfi")
    assert not function.is_declaration
    opcodes = {i.opcode for b in function.blocks for i in b.instructions}
    assert {"fadd", "load", "store"} <= opcodes


def test_a_database_of_another_version_is_not_written_into(tmp_path):
    db = tmp_path / "db"
    _native.init_database(str(db))
    assert json.loads((db / "database.json").read_text()) == {
        "format": "mneme-record-db", "version": _native.STORE_FORMAT_VERSION}
    _native.init_database(str(db))  # reopening is fine
    (db / "database.json").write_text('{"format":"mneme-record-db","version":2}')
    proc = run(["mneme", "record", "-rdb", str(db), "--", "true"], check=False)
    assert proc.returncode == 2 and f"{db / 'database.json'}: a record database of another" \
        in proc.stderr


def test_a_format_1_database_still_reads():
    """A database written with format 1, kept in the tree: a change to the
    layout that does not bump the version breaks this."""
    db = RecordDB(Path(__file__).parents[1] / "fixtures" / "record-db-v1")
    db.verify()
    (inst,) = db.instances
    a = np.arange(3000, dtype=np.float32)
    out = int(inst.arg_as(2, np.uint64))
    assert np.array_equal(inst.prologue.region(out).array(np.float32), np.zeros(3000))
    assert np.array_equal(inst.epilogue.region(out).array(np.float32), a + 0.5)
    assert inst.grid == (4, 1, 1) and db.kernels[0].demangled.startswith("add(")


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 7), (signal.SIGINT, 5),
                                            (signal.SIGHUP, 9)])
def test_signals_to_record_reach_the_application(tmp_path, signum, status):
    """The application decides what a signal means; mneme record exits with its
    status, leaves nothing running and the database readable."""
    import sys
    import time

    app = ("import signal, sys, time\n"
           "for s, code in ((signal.SIGTERM, 7), (signal.SIGINT, 5), (signal.SIGHUP, 9)):\n"
           "    signal.signal(s, lambda *a, code=code: sys.exit(code))\n"
           "print('up', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen(["mneme", "record", "-rdb", str(tmp_path / "db"), "--",
                             sys.executable, "-c", app], env=tool_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline() == "up\n"
    time.sleep(0.2)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == status and "Traceback" not in err, err
    from mneme_cc.record.db import RecordDB

    assert RecordDB(tmp_path / "db").instances == []
