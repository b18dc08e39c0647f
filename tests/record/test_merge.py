"""`mneme merge`: record databases made apart, gathered into one."""

from __future__ import annotations

import json

import numpy as np
from conftest import run
from synthetic_db import PTX, make_database

from mneme_cc.record import RecordDB, merge_databases

A, B = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"


def two_databases(tmp_path):
    x = np.arange(4096, dtype=np.float32)
    make_database(tmp_path / "node0", x, x, x + x, dynamic=A, image=PTX)
    make_database(tmp_path / "node1", x, 2 * x, 3 * x, dynamic=B, image=PTX)
    return tmp_path / "node0", tmp_path / "node1"


def test_instances_recorded_apart_merge_into_one_database(tmp_path):
    node0, node1 = two_databases(tmp_path)
    out = run(["mneme", "merge", "-rdb", str(tmp_path / "all"), str(node0), str(node1),
               "--json"])
    report = json.loads(out.stdout)["sources"]
    assert report[str(node0)]["copied"] == 1 and report[str(node1)]["copied"] == 1
    merged = RecordDB(tmp_path / "all")
    merged.verify()  # every checksum, every chunk
    assert sorted(i.dynamic_hash for i in merged.instances) == [A, B]
    for source in (node0, node1):
        (inst,) = RecordDB(source).instances
        (theirs,) = [i for i in merged.instances if i.name == inst.name]
        for before, after in zip(inst.prologue.regions, theirs.prologue.regions, strict=True):
            assert before.read().tobytes() == after.read().tobytes()
    assert merged.kernels[0].provenance == "ptx"  # the image came along
    # Shared chunks (the same input buffer) are stored once; a second merge adds nothing.
    again = merge_databases(tmp_path / "all", node1)
    assert (again.copied, again.present, again.chunks) == (0, 1, 0)


def test_a_merge_cut_short_is_finished_by_running_it_again(tmp_path):
    node0, node1 = two_databases(tmp_path)
    merge_databases(tmp_path / "all", node0)
    merge_databases(tmp_path / "all", node1)
    (tmp_path / "all" / "index" / f"00112233445566aa.{B}.json").unlink()  # as if killed
    assert len(RecordDB(tmp_path / "all").instances) == 1
    result = merge_databases(tmp_path / "all", node1)
    assert result.copied == 1 and result.chunks == 0
    RecordDB(tmp_path / "all").verify()


def test_bad_merges_are_one_line_errors_and_write_nothing_outside(tmp_path):
    node0, node1 = two_databases(tmp_path)
    proc = run(["mneme", "merge", "-rdb", str(node0), str(node0)], check=False)
    assert proc.returncode != 0 and "into itself" in proc.stderr
    proc = run(["mneme", "merge", "-rdb", str(tmp_path / "all"), str(tmp_path / "none")],
               check=False)
    assert proc.returncode != 0 and "no such record database" in proc.stderr
    (tmp_path / "papers").mkdir()
    (tmp_path / "papers" / "thesis.tex").write_text("not a database")
    proc = run(["mneme", "merge", "-rdb", str(tmp_path / "papers"), str(node0)], check=False)
    assert proc.returncode != 0 and "is not a record database" in proc.stderr
    assert sorted(p.name for p in (tmp_path / "papers").iterdir()) == ["thesis.tex"]
    # Another tool's database.json: refused before anything is made beside it.
    (tmp_path / "papers" / "thesis.tex").unlink()
    (tmp_path / "papers" / "database.json").write_text('{"format": "other",\n"version": 7}')
    proc = run(["mneme", "merge", "-rdb", str(tmp_path / "papers"), str(node0)], check=False)
    assert proc.returncode != 0 and "format other version 7" in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert sorted(p.name for p in (tmp_path / "papers").iterdir()) == ["database.json"]
    # A description naming a file outside the database.
    description = node1 / "00112233445566aa.json"
    kernel = json.loads(description.read_text())
    kernel["image"]["file"] = "../escape.mneme"
    description.write_text(json.dumps(kernel))
    proc = run(["mneme", "merge", "-rdb", str(tmp_path / "all"), str(node1)], check=False)
    assert proc.returncode != 0 and "not a file of the database" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "escape.mneme").exists()


def test_a_link_out_of_the_source_and_a_stale_state_in_the_target(tmp_path):
    """A source file that links elsewhere is refused; a prologue left in the
    target by a recording cut short is replaced, not kept."""
    node0, node1 = two_databases(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("not a database file")
    ir = node1 / "RecordedIR_00112233445566aa.bc"
    if ir.exists():
        ir.unlink()
    kernel = json.loads((node1 / "00112233445566aa.json").read_text())
    image = node1 / kernel["image"]["file"]
    image.unlink()
    image.symlink_to(secret)
    proc = run(["mneme", "merge", "-rdb", str(tmp_path / "all"), str(node1)], check=False)
    assert proc.returncode != 0 and "symbolic link" in proc.stderr
    # node0's instance, over a stale prologue of the same name in the target.
    (inst,) = RecordDB(node0).instances
    (tmp_path / "all").mkdir(exist_ok=True)
    (tmp_path / "all" / inst.entry["prologue"]).write_bytes(b"left by a recording cut short")
    merge_databases(tmp_path / "all", node0)
    RecordDB(tmp_path / "all").verify()
    assert (tmp_path / "all" / inst.entry["prologue"]).read_bytes() == \
        (node0 / inst.entry["prologue"]).read_bytes()


def test_directories_linked_out_of_a_database_are_not_written_through(tmp_path):
    """compact and merge refuse a database whose chunks, index or a chunk
    shard links elsewhere: nothing outside is rewritten."""
    import os

    node0, node1 = two_databases(tmp_path)
    outside = tmp_path / "outside"
    os.rename(node0 / "chunks", outside)
    (node0 / "chunks").symlink_to(outside)
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    proc = run(["mneme", "compact", "-rdb", str(node0)], check=False)
    assert proc.returncode != 0 and "a link out of the database" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    proc = run(["mneme", "merge", "-rdb", str(node0), str(node1)], check=False)
    assert proc.returncode != 0 and "a link out of the database" in proc.stderr
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before
    # A shard linked out of the target.
    target = tmp_path / "all"
    merge_databases(target, node1)
    shard = next(p for p in (target / "chunks").iterdir())
    os.rename(shard, tmp_path / "shard")
    shard.symlink_to(tmp_path / "shard")
    proc = run(["mneme", "merge", "-rdb", str(target), str(node1)], check=False)
    assert proc.returncode != 0 and shard.name in proc.stderr

