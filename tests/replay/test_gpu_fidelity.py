"""GPU tier (fidelity): in every cell of the floating-point flag matrix the
recorded IR replays with the application's numerics, and outputs that
differ between identical runs are classified, not failed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import FLAG_MATRIX, MATRIX_EXAMPLES, run, tool_env

from mneme_cc.record.db import RecordDB
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running.replayer import Replayer

pytestmark = pytest.mark.gpu

MATRIX_ARGS = {"fp_physics": ["65536", "2"], "cg": ["12", "10"], "wave3d": ["48", "4"]}
JACOBI_ARGS = ["2048", "2"]


@pytest.mark.parametrize("cell", list(FLAG_MATRIX))
@pytest.mark.parametrize("example", MATRIX_EXAMPLES)
def test_every_cell_replays_bitwise_with_both_baselines(example_binaries, tmp_path, example,
                                                        cell):
    binary = str(example_binaries / "matrix" / f"{example}.{cell}")
    db = tmp_path / "db"
    native = run([binary, *MATRIX_ARGS[example]])
    recorded = run(["mneme", "record", "-rdb", str(db), "--", binary, *MATRIX_ARGS[example]])
    assert recorded.stdout == native.stdout
    env = tool_env(MNEME_CACHE_DIR=str(tmp_path / "cache"))
    report = json.loads(run(["mneme", "check", "-rdb", str(db), "--json", "--iterations", "2"],
                            env=env).stdout)
    assert report["totals"]["failed"] == 0 and report["totals"]["instances"] >= 2
    for row in report["instances"]:
        outcomes = {name: b["outcome"] for name, b in row["baselines"].items()}
        assert outcomes["original"] == outcomes["ir"] == "verified", (row["kernel"], outcomes)
    codegen = RecordDB(db).kernels[0].ir_metadata["codegen"]
    assert codegen["source"] == "cc1"
    assert codegen["opt_level"] == ("0" if cell == "O0" else "2" if cell == "O2" else "3")


def test_a_float_atomic_norm_is_nondeterministic_and_tunes(example_binaries, tmp_path):
    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--kernels", "relax", "--",
         str(example_binaries / "jacobi_norm"), *JACOBI_ARGS])
    inst = RecordDB(db_path).instances[0]
    norm = f"allocation {int(inst.arg_as(3, np.uint64)):#x}"
    outcomes = set()
    with Replayer(inst, cache_dir=tmp_path / "cache") as replayer:
        # The atomics' order is the GPU's: replay until it differs from the recording.
        for _ in range(5):
            result = replayer.replay(ReplayConfig(baseline="ir", iterations=2, warmup=0))
            outcomes.add(result.outcome)
            assert result.verified and not result.mismatches
            if result.outcome == "nondeterministic":
                assert result.nondeterministic == [norm]
                break
        assert "nondeterministic" in outcomes
        found = replayer.nondeterminism
    assert [s.buffer for s in found.buffers] == [norm]  # the grid is deterministic
    (spread,) = found.buffers
    assert spread.dtype == "float32" and spread.differing == 1 and spread.max_ulp >= 1
    listing = json.loads(run(["mneme", "ls", "--json", str(db_path)]).stdout)
    entry = next(i for i in listing["kernels"][0]["instances"] if i["instance"] == inst.name)
    assert entry["determinism"]["state"] == "nondeterministic"
    # The tuner verifies the norm under the derived tolerance: nothing fails.
    env = tool_env(MNEME_CACHE_DIR=str(tmp_path / "cache"))
    summary = json.loads(run(["mneme", "tune", "-rdb", str(db_path), "-rid", inst.name,
                              "--space", "quick", "--sampler", "exhaustive", "--trials", "8",
                              "--iterations", "3", "--json"], env=env).stdout)
    assert summary["best_median_ms"] is not None
    assert set(summary["outcomes"]) <= {"verified", "nondeterministic", "numerics_changing"}
    assert summary["outcomes"].get("verified", 0) + summary["outcomes"].get(
        "nondeterministic", 0) >= 4


def test_contraction_pinned_for_ptxas_keeps_the_physics_bitwise(example_binaries, tmp_path):
    """A bitwise study runs other ptxas levels pinned: every level verifies,
    and the unpinned ones say they change the numerics when they fail."""
    binary = str(example_binaries / "matrix" / "fp_physics.default")
    db_path = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db_path), "--kernels", "forces", "--", binary,
         *MATRIX_ARGS["fp_physics"]])
    inst = RecordDB(db_path).instances[0]
    with Replayer(inst, cache_dir=tmp_path / "cache") as replayer:
        for level in range(4):
            pinned = replayer.replay(ReplayConfig(ptxas_opt_level=level, pin_contraction=True,
                                                  iterations=2, warmup=0))
            assert pinned.outcome == "verified" and pinned.numerics == []
            plain = replayer.replay(ReplayConfig(ptxas_opt_level=level, iterations=2, warmup=0))
            assert plain.verified or plain.failure.startswith("numerics-changing: ptxas")
        o0 = replayer.replay(ReplayConfig(pipeline="default<O0>", iterations=2, warmup=0))
        assert o0.numerics[0].startswith("the default<O0> pipeline fuses multiply-adds")
