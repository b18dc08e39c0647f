"""CPU tier: `mneme replay` refuses bad input with one line and exit status 2."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import have_gpu, run
from synthetic_db import make_database


@pytest.fixture
def database(tmp_path):
    a = np.arange(3000, dtype=np.float32)
    make_database(tmp_path / "db", a, a, a + a)
    return tmp_path / "db"


@pytest.mark.parametrize("args, message", [
    (["loop-magic"], "unknown pass(es) in pipeline 'loop-magic'"),
    (["-rid", "nope"], "no instance in"),
    (["--grid", "1,x"], "is not X[,Y[,Z]]"),
    (["--grid", ","], "--grid ',' is not X[,Y[,Z]]"),
    (["--block", "1,2,3,4"], "is not X[,Y[,Z]]"),
    (["--fp-contract", "sometimes"], "fp_contract must be fast, on or off"),
    (["--specialize-args", "a"], "not a list of parameter indices"),
    (["--baseline", "best"], "baseline must be one of"),
    (["--device", "-1"], "--device is a GPU ordinal"),
    (["--min-blocks", "-3"], "--min-blocks is a count of blocks per SM"),
    (["--grid", "99999999999999999999"], "a side past 2^31 - 1"),
    (["--iterations", "many"], "Invalid value for '--iterations'"),  # typer's parse, one line
])
def test_bad_replay_input(database, args, message):
    proc = run(["mneme", "replay", "-rdb", str(database), *args], check=False)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_missing_or_corrupt_artifacts(database, tmp_path):
    proc = run(["mneme-replay", "-rdb", str(tmp_path / "absent")], check=False)
    assert proc.returncode == 2 and "no such record database" in proc.stderr
    (database / "RecordedIR_00112233445566aa.bc").write_bytes(b"BC\xc0\xde broken")
    proc = run(["mneme", "replay", "-rdb", str(database)], check=False)
    assert proc.returncode == 2 and "corrupt (content hash mismatch)" in proc.stderr
    assert "Traceback" not in proc.stderr
    state = next(database.glob("DeviceState.epilogue.*"))
    state.write_bytes(state.read_bytes()[:-5])
    proc = run(["mneme", "replay", "-rdb", str(database), "--baseline", "original"], check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


@pytest.mark.skipif(have_gpu(), reason="checks the message on a machine without a GPU")
def test_no_gpu_is_one_clear_line(database):
    proc = run(["mneme", "replay", "-rdb", str(database)], check=False)
    assert proc.returncode == 2 and "NVIDIA" in proc.stderr and "Traceback" not in proc.stderr
