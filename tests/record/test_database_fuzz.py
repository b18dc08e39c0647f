"""CPU tier: a damaged database never ends in a traceback.

A real (synthetic) database is mutated: every key of the index entry and of
the kernel description deleted or given another type, file names pointed
outside the database, every file truncated. The commands that read it
answer with one line on stderr and exit 2, or with their normal output.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from synthetic_db import make_database
from typer.testing import CliRunner

from mneme_cc.cli.typer_app import app

COMMANDS = (["ls", "--verify"], ["ls", "--json"], ["show", "00112233445566aa.8899aabbccddeeff"],
            ["show", "00112233445566aa"])
ODD_VALUES = (None, [], "x", -1, 1.5, "../../../etc/passwd")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    db = tmp_path_factory.mktemp("pristine") / "db"
    a = np.arange(1024, dtype=np.float32)
    make_database(db, a, a, a + a)
    return db


def mutations(pristine, chunks: int | None = None):
    """(label, function that damages a copy of the database); `chunks` limits
    how many chunk files are truncated (a real database has thousands)."""
    entry_path = sorted((pristine / "index").glob("*.json"))[0]
    entry = json.loads(entry_path.read_text())
    kernel_path = next(p for p in sorted(pristine.glob("*.json")) if p.name != "database.json")
    kernel = json.loads(kernel_path.read_text())
    out = []
    for relative, data in ((entry_path.relative_to(pristine), entry),
                           (kernel_path.relative_to(pristine), kernel)):
        for key in data:
            def delete(db, relative=relative, data=data, key=key):
                (db / relative).write_text(json.dumps({k: v for k, v in data.items() if k != key}))
            out.append((f"{relative}: no {key}", delete))
            for value in ODD_VALUES:
                def change(db, relative=relative, data=data, key=key, value=value):
                    (db / relative).write_text(json.dumps({**data, key: value}))
                out.append((f"{relative}: {key}={value!r}", change))
    files = sorted(p for p in pristine.rglob("*") if p.is_file())
    chunk_files = [p for p in files if p.parent.parent.name == "chunks"]
    if chunks is not None:
        files = [p for p in files if p not in chunk_files] + chunk_files[:chunks]
    for path in files:
        relative = path.relative_to(pristine)
        size = path.stat().st_size
        for keep in sorted({0, size // 2, max(size - 1, 0)}):
            def truncate(db, relative=relative, keep=keep):
                target = db / relative
                target.write_bytes(target.read_bytes()[:keep])
            out.append((f"{relative} cut to {keep} bytes", truncate))
    return out


def test_no_damage_ends_in_a_traceback(pristine, tmp_path):
    assert_no_traceback(pristine, tmp_path, mutations(pristine))


def assert_no_traceback(pristine: Path, tmp_path: Path, cases) -> None:
    """Every damaged copy: each command answers normally or with one line and exit 2."""
    runner = CliRunner()
    failures = []
    assert len(cases) > 100
    commands = [c if c[0] != "show" else [c[0], _instance_key(pristine) if "." in c[1] else
                                          _instance_key(pristine).split(".")[0]]
                for c in COMMANDS]
    for n, (label, damage) in enumerate(cases):
        db = tmp_path / f"db{n}"
        shutil.copytree(pristine, db)
        damage(db)
        for command in commands:
            result = runner.invoke(app, [command[0], str(db), *command[1:]])
            lines = result.stderr.strip().splitlines()
            if result.exception is not None and not isinstance(result.exception, SystemExit) \
                    or result.exit_code not in (0, 2) or \
                    (result.exit_code == 2 and len(lines) != 1):
                failures.append((label, command, result.exit_code, repr(result.exception),
                                 result.stderr[-300:]))
        shutil.rmtree(db)
    assert not failures, failures[:5]


def _instance_key(db: Path) -> str:
    """`<static>.<dynamic>` of the database's first instance."""
    return sorted((db / "index").glob("*.json"))[0].stem


def test_a_chunk_s_claimed_size_is_checked_before_memory_is_taken(pristine, tmp_path):
    """A chunk file of terabytes (sparse), or a header claiming terabytes of
    raw bytes, is an error naming the file, not an allocation that fails."""
    from mneme_cc.errors import RecordDBError
    from mneme_cc.record import RecordDB
    from mneme_cc.record.compact import chunk_names

    db = tmp_path / "db"
    shutil.copytree(pristine, db)
    first, second = chunk_names(db)[:2]
    huge = db / "chunks" / first[:2] / first
    os.truncate(huge, 1 << 43)
    lying = db / "chunks" / second[:2] / second
    header = bytearray(lying.read_bytes())
    header[12:16] = (1).to_bytes(4, "little")        # zstd
    header[16:24] = (1 << 43).to_bytes(8, "little")  # raw size: 8 TiB
    lying.write_bytes(bytes(header))
    for name, says in ((first, "larger than any chunk"), (second, "more than any chunk")):
        with pytest.raises(RecordDBError, match=says):
            RecordDB(db).read_chunk(name)
