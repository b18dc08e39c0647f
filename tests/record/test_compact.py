"""`mneme compact`: chunks a recording stored raw, compressed in place."""

from __future__ import annotations

import json
import os

import numpy as np
from conftest import run
from synthetic_db import chunk_codec as codec
from synthetic_db import make_database

from mneme_cc import _native
from mneme_cc.record import RecordDB, compact_database
from mneme_cc.record.compact import chunk_names


def raw_database(tmp_path):
    """The synthetic instance, every chunk stored raw, plus a chunk of noise."""
    db = tmp_path / "rdb"
    x = np.arange(1 << 16, dtype=np.float32)
    make_database(db, x, x, x + x)
    for name in chunk_names(db):
        data = _native.read_chunk(str(db), name)
        path = db / "chunks" / name[:2] / name
        path.unlink()
        assert _native.write_chunk(str(db), data, 0)[0] == name  # raw
    noise, _ = _native.write_chunk(str(db), np.random.default_rng(1).bytes(1 << 16), 0)
    return db, noise


def test_raw_chunks_are_compressed_in_place_and_read_back_the_same(tmp_path):
    db, noise = raw_database(tmp_path)
    names = chunk_names(db)
    before = {n: _native.read_chunk(str(db), n) for n in names}
    sizes = {n: (db / "chunks" / n[:2] / n).stat().st_size for n in names}
    noise_inode = (db / "chunks" / noise[:2] / noise).stat().st_ino
    private = next(n for n in names if n != noise)
    (db / "chunks" / private[:2] / private).chmod(0o600)
    (db / "chunks" / names[0][:2] / f"{names[0]}.tmp.123.0").write_bytes(b"a writer at work")
    out = run(["mneme", "compact", "-rdb", str(db), "--json"])
    report = json.loads(out.stdout)
    assert report["chunks"] == len(names) and not report["failed"]
    assert report["bytes_after"] < report["bytes_before"] == sum(sizes.values())
    shrunk = 0
    for n in names:
        assert _native.read_chunk(str(db), n) == before[n]
        size = (db / "chunks" / n[:2] / n).stat().st_size
        assert codec(db, n) == (size < sizes[n])  # kept raw where zstd does not pay
        shrunk += size < sizes[n]
        if len(before[n]) >= 4096:  # data chunks; the argument bytes are too few to pay
            assert codec(db, n) == (n != noise)
    assert report["compacted"] == shrunk >= len(names) - 2
    assert (db / "chunks" / noise[:2] / noise).stat().st_ino == noise_inode  # not rewritten
    assert (db / "chunks" / private[:2] / private).stat().st_mode & 0o777 == 0o600
    RecordDB(db).verify()
    # Compressed already: a second run rewrites nothing.
    again = compact_database(db)
    assert again.compacted == 0 and again.bytes_after == report["bytes_after"]
    assert not [p for p in (db / "chunks").rglob("*.tmp.*") if p.name != f"{names[0]}.tmp.123.0"]


def test_a_damaged_chunk_is_left_alone_and_named(tmp_path):
    db, noise = raw_database(tmp_path)
    victim = next(n for n in chunk_names(db) if n != noise)
    path = db / "chunks" / victim[:2] / victim
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    proc = run(["mneme", "compact", "-rdb", str(db)], check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and victim in proc.stderr and "corrupt" in proc.stderr
    assert path.read_bytes() == bytes(data)  # not replaced
    others = [n for n in chunk_names(db) if n not in (victim, noise)]
    assert sum(codec(db, n) == 1 for n in others) >= len(others) - 1


def test_files_that_only_look_like_chunks(tmp_path):
    """A FIFO is not waited on, a huge sparse file is not read whole, a
    directory is not a chunk: each is named, the rest compacted."""
    db, _ = raw_database(tmp_path)
    shard = db / "chunks" / "ab"
    shard.mkdir(exist_ok=True)
    os.mkfifo(shard / ("ab" + "0" * 30))
    huge = shard / ("ab" + "f" * 30)
    huge.write_bytes(b"MNEMECK\0" + (1).to_bytes(4, "little") + bytes(44))
    os.truncate(huge, 1 << 43)  # 8 TiB, sparse
    (shard / ("ab" + "1" * 30)).mkdir()
    proc = run(["mneme", "compact", "-rdb", str(db), "--json"], check=False, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and huge.name in proc.stderr
    assert "size disagrees with its header" in proc.stderr
    assert json.loads(proc.stdout)["compacted"] > 100


def test_bad_compactions_are_one_line_errors(tmp_path):
    db, _ = raw_database(tmp_path)
    for args, says in ((["--zstd-level", "0"], "compacting compresses"),
                       (["--zstd-level", "20"], "from 1 to 19")):
        proc = run(["mneme", "compact", "-rdb", str(db), *args], check=False)
        assert proc.returncode != 0 and says in proc.stderr and proc.stderr.count("\n") == 1
    (tmp_path / "papers").mkdir()
    proc = run(["mneme", "compact", "-rdb", str(tmp_path / "papers")], check=False)
    assert proc.returncode != 0 and "not a record database" in proc.stderr
    assert os.listdir(tmp_path / "papers") == []
