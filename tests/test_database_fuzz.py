"""CPU tier: a damaged database never ends in a traceback.

A real (synthetic) database is mutated: every key of the index entry and of
the kernel description deleted or given another type, file names pointed
outside the database, every file truncated. The commands that read it
answer with one line on stderr and exit 2, or with their normal output.
"""

from __future__ import annotations

import json
import shutil

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


def mutations(pristine):
    """(label, function that damages a copy of the database)."""
    (entry_path,) = (pristine / "index").glob("*.json")
    entry = json.loads(entry_path.read_text())
    kernel_path = next(pristine.glob("*.json"))
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
    for path in sorted(p for p in pristine.rglob("*") if p.is_file()):
        relative = path.relative_to(pristine)
        size = path.stat().st_size
        for keep in sorted({0, size // 2, max(size - 1, 0)}):
            def truncate(db, relative=relative, keep=keep):
                target = db / relative
                target.write_bytes(target.read_bytes()[:keep])
            out.append((f"{relative} cut to {keep} bytes", truncate))
    return out


def test_no_damage_ends_in_a_traceback(pristine, tmp_path):
    runner = CliRunner()
    failures = []
    cases = mutations(pristine)
    assert len(cases) > 100
    for n, (label, damage) in enumerate(cases):
        db = tmp_path / f"db{n}"
        shutil.copytree(pristine, db)
        damage(db)
        for command in COMMANDS:
            result = runner.invoke(app, [command[0], str(db), *command[1:]])
            lines = result.stderr.strip().splitlines()
            if result.exception is not None and not isinstance(result.exception, SystemExit) \
                    or result.exit_code not in (0, 2) or \
                    (result.exit_code == 2 and len(lines) != 1):
                failures.append((label, command, result.exit_code, repr(result.exception),
                                 result.stderr[-300:]))
        shutil.rmtree(db)
    assert not failures, failures[:5]
