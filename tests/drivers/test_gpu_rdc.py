"""GPU tier: relocatable device code runs like nvcc's build, records, and
every instance replays verified from the linked IR, the kernel that calls
into another TU's device library included.

The sample (tests/samples/rdc) is built each way of conftest.RDC_BUILDS and
with nvcc.  On a GPU machine without clang, MNEME_PREBUILT names the
directory scripts/build-gpu-carry filled: its `rdc/<how>/rdc_sample`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import RDC_BUILDS, build_rdc_sample, run

from mneme_cc.record.db import RecordDB
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running.replayer import Replayer

pytestmark = pytest.mark.gpu

CALLER = "_Z9integratePfS_if"  # integrate.cu, calls physics.cu's drag()
CALLEE = "_Z4dragf"


def expected_output(n: int = 4096, steps: int = 6) -> str:
    """What main.cu prints, computed here (every value is exact in float)."""
    i = np.arange(n)
    x = (i % 64).astype(np.float32)
    v = (i % 7 - 3).astype(np.float32)
    bounces = 0
    for _ in range(steps):
        v = (v * np.float32(0.5) - np.float32(2.0) * np.float32(0.25)).astype(np.float32)
        x = (x + v * np.float32(0.25)).astype(np.float32)
        below = x < 0
        bounces += int(below.sum())
        x = np.where(below, -x, x)
        v = np.where(below, -v, v)
    return (f"rdc n={n} steps={steps} position={x.astype(np.float64).sum():.6f} "
            f"velocity={v.astype(np.float64).sum():.6f} bounces={bounces}\n")


@pytest.fixture(scope="module")
def rdc_programs(tmp_path_factory) -> dict[str, Path]:
    prebuilt = os.environ.get("MNEME_PREBUILT")
    names = (*RDC_BUILDS, "nvcc")
    if prebuilt:
        return {how: Path(prebuilt) / "rdc" / how / "rdc_sample" for how in names}
    if not shutil.which("clang-22") and not os.environ.get("MNEME_CLANG"):
        pytest.fail("the GPU tier needs builds of the rdc sample: clang-22 here, or "
                    "MNEME_PREBUILT from scripts/build-gpu-carry")
    out = tmp_path_factory.mktemp("rdc")
    return {how: build_rdc_sample(how, out) for how in names}


def test_every_build_prints_what_nvcc_s_prints(rdc_programs):
    outputs = {how: run([str(path)]).stdout for how, path in rdc_programs.items()}
    assert outputs["nvcc"] == expected_output()
    assert outputs == {how: outputs["nvcc"] for how in outputs}


def configs(inst) -> list[ReplayConfig]:
    quick = dict(iterations=3, warmup=1)
    return [ReplayConfig(baseline="original", **quick), ReplayConfig(baseline="ir", **quick),
            ReplayConfig(pipeline="default<O3>", specialize_args=inst.scalar_params(),
                         specialize_dims=True, launch_bounds=True, **quick),
            ReplayConfig(pipeline="default<O1>", **quick)]


@pytest.mark.parametrize("how", RDC_BUILDS)
def test_recorded_and_replayed_verified_from_the_linked_ir(rdc_programs, how, tmp_path):
    db_path = tmp_path / "db"
    recorded = run(["mneme", "record", "-rdb", str(db_path), "--", str(rdc_programs[how])])
    assert recorded.stdout == expected_output()  # recording changes nothing
    db = RecordDB(db_path)
    by_name = {k.name: k for k in db.kernels}
    assert set(by_name) == {"_Z4initPfS_i", CALLER}
    caller = by_name[CALLER]
    assert caller.ir_metadata["linked"] is True
    drag = caller.module.get_function(CALLEE)
    assert not drag.is_declaration  # the other TU's function is in the replayed IR
    assert {g["name"] for g in caller.globals} >= {"g_gravity", "g_bounces"}
    failures = []
    for inst in db.instances:
        with Replayer(inst, cache_dir=tmp_path / "cache") as replayer:
            for config in configs(inst):
                result = replayer.replay(config)
                if not result.verified:
                    failures.append((inst.kernel_name, config.baseline, config.pipeline,
                                     result.outcome, result.mismatches[:2]))
    assert not failures, failures
    assert CALLER in {inst.kernel_name for inst in db.instances}
