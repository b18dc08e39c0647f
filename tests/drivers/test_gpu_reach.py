"""GPU tier: tests/samples/reach built by its unchanged CMake project with
mneme-nvcc prints what nvcc's build prints, records, and every instance
replays verified with the application's kernel and with its IR (the kernel
that launches kernels linked with the device runtime).

On a GPU machine without clang, MNEME_PREBUILT names the directory
scripts/build-gpu-carry filled: its `reach/mneme` and `reach/nvcc` builds.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import REACH_KERNELS, REACH_PROGRAMS, build_reach, run, tool_env

from mneme_cc.record.db import RecordDB
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running.replayer import Replayer

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, Path]:
    prebuilt = os.environ.get("MNEME_PREBUILT")
    if prebuilt:
        return {how: Path(prebuilt) / "reach" / how for how in ("mneme", "nvcc")}
    if not shutil.which("clang-22") and not os.environ.get("MNEME_CLANG"):
        pytest.fail("the GPU tier needs builds of the reach sample: clang-22 here, or "
                    "MNEME_PREBUILT from scripts/build-gpu-carry")
    out = tmp_path_factory.mktemp("reach")
    return {"mneme": build_reach(out / "mneme"), "nvcc": build_reach(out / "nvcc", "nvcc")}


def program_env(build: Path) -> dict[str, str]:
    """Where scan_app finds libscan.so when the build was carried elsewhere."""
    return tool_env(LD_LIBRARY_PATH=os.pathsep.join(filter(None, [
        str(build), os.environ.get("LD_LIBRARY_PATH")])))


@pytest.mark.parametrize("program", REACH_PROGRAMS)
def test_prints_what_nvcc_s_build_prints(builds, program):
    printed = {how: run([str(build / program)], env=program_env(build)).stdout
               for how, build in builds.items()}
    assert printed["mneme"] == printed["nvcc"] and printed["nvcc"].strip()
    assert "error" not in printed["nvcc"].replace("no error", "")


@pytest.mark.parametrize("program", REACH_PROGRAMS)
def test_records_and_replays_verified(builds, program, tmp_path):
    build = builds["mneme"]
    expected = run([str(build / program)], env=program_env(build)).stdout
    db_path = tmp_path / "db"
    recorded = run(["mneme", "record", "-rdb", str(db_path), "--", str(build / program)],
                   env=program_env(build))
    assert recorded.stdout == expected  # recording changes nothing
    db = RecordDB(db_path)
    library = "libscan.so" if program == "scan_app" else program
    # Every kernel the host launches (dp's child is launched by its parent).
    assert {k.name for k in db.kernels} == REACH_KERNELS[library] - {"_Z5childPiii"}
    failures = []
    for inst in db.instances:
        with Replayer(inst, cache_dir=tmp_path / "cache") as replayer:
            for baseline in ("original", "ir"):
                result = replayer.replay(ReplayConfig(baseline=baseline, iterations=3, warmup=1))
                if not result.verified:
                    failures.append((inst.kernel_name, baseline, result.outcome,
                                     result.mismatches[:2]))
    assert db.instances and not failures, failures
