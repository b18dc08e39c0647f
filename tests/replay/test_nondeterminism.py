"""CPU tier: what replay makes of outputs that differ between identical runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run

from mneme_cc.errors import RecordDBError
from mneme_cc.replay.judging import nondeterminism as nd
from mneme_cc.replay.judging.verify import Policy, compare


def as_bytes(a: np.ndarray) -> np.ndarray:
    return np.frombuffer(a.tobytes(), np.uint8)


def test_the_spread_is_the_worst_pair_and_its_tolerance_admits_it():
    rng = np.random.default_rng(3)
    recorded = rng.random(1000, dtype=np.float32)
    runs = [recorded.copy(), recorded.copy()]
    runs[0][10] = np.nextafter(recorded[10], np.float32(2))
    runs[1][10] = np.nextafter(runs[0][10], np.float32(2))  # two ULPs from the recording
    found = nd.spread("allocation 0x1000", as_bytes(recorded), [as_bytes(v) for v in runs],
                      "float32")
    assert (found.differing, found.max_ulp) == (1, 2)
    policy = found.policy()
    assert policy["dtype"] == "float32" and policy["ulp"] == 2 * nd.TOLERANCE_FACTOR
    # Within the spread passes; far outside it does not.
    near = recorded.copy()
    near[10] = runs[1][10]
    assert compare("b", 0, as_bytes(near), as_bytes(recorded), Policy(**policy)) is None
    far = recorded.copy()
    far[10] += 0.5
    assert compare("b", 0, as_bytes(far), as_bytes(recorded), Policy(**policy)).count == 1
    # Runs that agree among themselves: no nondeterminism, even against a
    # recording they all differ from (that is a failure to reproduce).
    assert nd.spread("g", as_bytes(recorded), [as_bytes(runs[0])] * 3, "float32") is None
    # Bytes without a type: no tolerance.
    untyped = nd.spread("g", as_bytes(recorded), [as_bytes(v) for v in runs], None)
    assert untyped.differing == 1 and untyped.policy() is None  # one byte of one float
    # A recorded zero: the relative spread is unbounded and bounds nothing;
    # a ULP spread across zero is no rounding and bounds nothing either.
    zero = np.zeros(4, np.float32)
    tiny = zero.copy()
    tiny[0] = 1e-30
    wide = nd.spread("z", as_bytes(zero), [as_bytes(zero), as_bytes(tiny)], "float32")
    assert wide.max_rel is None and wide.max_abs == pytest.approx(1e-30)
    assert wide.policy() == {"dtype": "float32", "abs": pytest.approx(4e-30)}
    json.dumps(nd.Nondeterminism("original", 3, [wide]).to_dict(), allow_nan=False)


def test_findings_round_trip_through_the_database(instance):
    finding = nd.Nondeterminism("original", 2, [nd.Spread("allocation 0x10", "float32", 1, 1e-7,
                                                          1e-6, 3)])
    assert nd.load(instance) is None
    nd.store(instance, finding)
    loaded = nd.load(instance)
    assert loaded == finding and not loaded.deterministic
    assert loaded.policies() == {"allocation 0x10": finding.buffers[0].policy()}
    listing = json.loads(run(["mneme", "ls", "--json", str(instance.db.path)]).stdout)
    (entry,) = listing["kernels"][0]["instances"]
    assert entry["determinism"]["state"] == "nondeterministic"
    table = run(["mneme", "ls", str(instance.db.path)]).stdout
    assert "nondeterministic: allocation 0x10 max ulp 3" in table


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"format": "mneme-fidelity"}',
                                     '{"format": "mneme-fidelity", "version": 1, '
                                     '"reference": "original", "runs": 2, "buffers": [{"x": 1}]}',
                                     '{"format": "mneme-fidelity", "version": 1, '
                                     '"reference": "original", "runs": 2, "buffers": [{"buffer": '
                                     '"g", "dtype": "float32", "differing": 1, "max_ulp": "x"}]}'])
def test_a_damaged_finding_is_one_line(instance, content):
    instance.fidelity_path.parent.mkdir()
    instance.fidelity_path.write_text(content)
    with pytest.raises(RecordDBError, match="delete it and replay again"):
        nd.load(instance)
    proc = run(["mneme", "ls", str(instance.db.path)], check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "delete it and replay again" in proc.stderr and "Traceback" not in proc.stderr


def test_runs_that_agree_but_differ_from_the_recording_are_not_reproduced(instance):
    finding = nd.Nondeterminism("original", 3, [], ["allocation 0x10"])
    nd.store(instance, finding)
    assert nd.load(instance).state == "not reproduced"
    assert "not reproduced by the application's kernel: allocation 0x10" in run(
        ["mneme", "ls", str(instance.db.path)]).stdout


def test_runs_that_agree_but_not_with_the_recording_are_run_more_before_the_verdict():
    recorded = np.arange(64, dtype=np.float32)
    late = recorded.copy()
    late[0] = np.nextafter(late[0], np.float32(1))  # one ULP: the atomics' order
    asked = []

    def finding(first, then):
        def more(count):
            asked.append(count)
            return [{"norm": as_bytes(v)} for v in then[:count]]
        return nd.found("original", {"norm": as_bytes(recorded)}, {"norm": "float32"},
                        [{"norm": as_bytes(v)} for v in first], more)

    # Three runs alike, unlike the recording: more runs show the spread.
    alike = finding([late] * nd.RUNS, [late] * 5 + [recorded] * 3)
    assert alike.state == "nondeterministic" and alike.runs == nd.RUNS + nd.MORE_RUNS
    assert alike.buffers[0].max_ulp == 1 and asked == [nd.MORE_RUNS]
    # Still alike after them: the kernel does not reproduce the recording.
    asked.clear()
    wrong = finding([late] * nd.RUNS, [late] * nd.MORE_RUNS)
    assert wrong.state == "not reproduced" and wrong.unreproduced == ["norm"]
    assert asked == [nd.MORE_RUNS]
    # Runs that already disagree, or reproduce the recording: no more runs.
    asked.clear()
    assert finding([late, recorded, late], []).state == "nondeterministic"
    assert finding([recorded] * nd.RUNS, []).state == "deterministic"
    assert asked == []


def test_an_index_entry_with_a_bad_hash_is_refused(instance):
    from mneme_cc.record.db import RecordDB

    (entry_path,) = (instance.db.path / "index").glob("*.json")
    entry = json.loads(entry_path.read_text())
    entry["dynamic_hash"] = "../../escape"
    entry_path.write_text(json.dumps(entry))
    with pytest.raises(RecordDBError, match="'dynamic_hash' is not a hex hash"):
        _ = RecordDB(instance.db.path).instances
    entry["dynamic_hash"] = instance.dynamic_hash
    entry["prologue"] = "DeviceState\u0000x"
    entry_path.write_text(json.dumps(entry))
    with pytest.raises(RecordDBError, match="not a file of the database"):
        _ = RecordDB(instance.db.path).instances


def test_check_needs_a_database(tmp_path):
    proc = run(["mneme", "check", "-rdb", str(tmp_path / "none")], check=False)
    assert proc.returncode == 2 and "no such record database" in proc.stderr
    proc = run(["mneme", "check", "-rdb", str(tmp_path), "--iterations", "0"], check=False)
    assert proc.returncode == 2 and "--iterations must be at least 1" in proc.stderr
