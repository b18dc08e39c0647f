"""GPU tier: kernels mneme-cc did not compile (tests/samples/anykernel).

An nvcc-built program (sm_90 code with compute_90 PTX, and machine code
only; the shared CUDA runtime, and the static one nvcc links by default)
and a driver-API program that loads PTX, a cubin or a fatbinary with
cuModuleLoadData and launches with cuLaunchKernel and cuLaunchKernelEx:
each records with its output unchanged, says what it carries, replays bit
for bit with the application's image (and, with PTX, with that PTX
assembled here), and tunes to a verified configuration in the space that
follows what it carries.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import build_anykernel, run

from mneme_cc.record.db import RecordDB

pytestmark = pytest.mark.gpu

SCALE_ADD = "_Z9scale_addPfPKffi"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_anykernel(tmp_path_factory.mktemp("anykernel"), "runtime_ptx", "runtime_cubin",
                           "runtime_static", "runtime_static_ptsz", "driver_app", "kernels.ptx",
                           "other.ptx", "kernels.cubin", "kernels.fatbin")


def record(tmp_path, *command: str) -> RecordDB:
    expected = run(list(command)).stdout
    db_path = tmp_path / "db"
    recorded = run(["mneme", "record", "-rdb", str(db_path), "--", *command])
    assert recorded.stdout == expected and "checksum" in expected  # recording changes nothing
    return RecordDB(db_path)


def check(db: RecordDB) -> dict:
    out = run(["mneme", "check", "-rdb", str(db.path), "--json"])
    report = json.loads(out.stdout)
    assert report["totals"]["failed"] == 0, out.stdout
    assert report["totals"]["bitwise"] == report["totals"]["instances"] == len(db.instances)
    return report


def tune(db: RecordDB, kernel: str) -> list[dict]:
    """Each instance of kernel tuned briefly: a verified best, nothing refused."""
    out = run(["mneme", "tune", "-rdb", str(db.path), "--kernel", kernel, "--timeout", "6",
               "--json"])
    summaries = json.loads(out.stdout)
    summaries = summaries if isinstance(summaries, list) else [summaries]
    for summary in summaries:
        assert summary["best_median_ms"] is not None, summary
        assert summary["outcomes"].get("verified", 0) >= 1, summary
        assert not summary["outcomes"].get("compile_error"), summary
        assert not summary["outcomes"].get("failed_verification"), summary
    return summaries


@pytest.mark.parametrize("program", ["runtime_ptx", "runtime_static", "runtime_static_ptsz"])
def test_an_nvcc_build_with_ptx_records_replays_and_tunes_its_ptx(built, tmp_path, program):
    """With the shared CUDA runtime, and with the static one nvcc links by
    default (seen through the driver's entry points), also with each host
    thread's own default stream (the driver's _ptsz launches)."""
    db = record(tmp_path, str(built / program))
    assert {k.name for k in db.kernels} == {SCALE_ADD, "_Z10accumulateIdEvPT_PKS0_i"}
    assert {k.provenance for k in db.kernels} == {"ptx"}
    report = check(db)
    assert all(set(i["baselines"]) == {"original", "ptx"} for i in report["instances"])
    tune(db, SCALE_ADD)


def test_machine_code_only_replays_and_tunes_geometry(built, tmp_path):
    db = record(tmp_path, str(built / "runtime_cubin"))
    assert {k.provenance for k in db.kernels} == {"cubin"}
    report = check(db)
    assert all(set(i["baselines"]) == {"original"} for i in report["instances"])
    tune(db, SCALE_ADD)


@pytest.mark.parametrize("module, carries", [("kernels.ptx", "ptx"), ("kernels.cubin", "cubin"),
                                             ("kernels.fatbin", "ptx")])
def test_modules_loaded_through_the_driver_record_replay_and_tune(built, tmp_path, module,
                                                                  carries):
    db = record(tmp_path, str(built / "driver_app"), str(built / module))
    assert {k.name for k in db.kernels} == {"saxpy", "shift"}
    assert {k.provenance for k in db.kernels} == {carries}
    apis = {i.api for i in db.instances}
    assert apis == {"cuLaunchKernel", "cuLaunchKernelEx"}
    # The table the host rewrote is part of shift's instance, so it replays.
    (shift,) = [i for i in db.instances if i.kernel_name == "shift"]
    assert [g.name for g in shift.prologue.globals] == ["bias"]
    check(db)
    tune(db, "saxpy")


@pytest.mark.parametrize("first, second", [("lib", ""), ("libfile", "file:")])
def test_a_library_s_module_is_recorded_as_the_library_s(built, tmp_path, first, second):
    """cuLibraryLoadData (or cuLibraryLoadFromFile), then cuLibraryGetModule and
    cuModuleGetFunction: the launches are the library's kernels, with the
    globals looked up through its module, and replay verifies; then a plain
    module after it (cuModuleLoadData, or cuModuleLoad from the file)."""
    db = record(tmp_path, str(built / "driver_app"), f"{first}:{built / 'kernels.ptx'}",
                f"{second}{built / 'other.ptx'}")
    assert sorted(k.name for k in db.kernels) == ["saxpy", "saxpy", "shift", "shift"]
    shifts = [i for i in db.instances if i.kernel_name == "shift"]
    assert all([g.name for g in i.prologue.globals] == ["bias"] for i in shifts)
    check(db)


def test_arguments_packed_in_extra_are_recorded(built, tmp_path):
    """cuLaunchKernel with the arguments in one buffer (`extra`, as PyCUDA
    passes them): recorded as any launch, and replayed bit for bit."""
    from conftest import tool_env

    command = [str(built / "driver_app"), str(built / "kernels.ptx")]
    env = tool_env(DRIVER_APP_EXTRA="1")
    native = run(command, env=env).stdout
    assert native == run(command).stdout  # the same arguments either way
    db_path = tmp_path / "db"
    recorded = run(["mneme", "record", "-rdb", str(db_path), "--", *command], env=env)
    assert recorded.stdout == native
    db = RecordDB(db_path)
    (saxpy,) = [i for i in db.instances if i.kernel_name == "saxpy"]
    assert saxpy.api == "cuLaunchKernel" and int(saxpy.arg_as(3, np.int32)) == 1 << 20
    check(db)


@pytest.mark.parametrize("program, module, kernel", [
    ("runtime_ptx", None, SCALE_ADD), ("runtime_static", None, SCALE_ADD),
    ("runtime_cubin", None, SCALE_ADD), ("driver_app", "kernels.ptx", "saxpy")])
def test_the_tuned_kernel_is_served_in_the_unchanged_program(built, tmp_path, program, module,
                                                             kernel):
    """Exported and run with `mneme run --tuned`: every launch of the tuned
    kernel at the tuned shape is served, the output is the program's own."""
    command = [str(built / program), *([str(built / module)] if module else [])]
    native = run(command).stdout
    db = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db), "--kernels", kernel, "--max-instances", "1", "--",
         *command])
    run(["mneme", "tune", "-rdb", str(db), "--timeout", "5", "--study", "s"])
    # Served whatever the speedup: a winner that did not beat the application
    # is bundled all the same (the application's own settings when it won).
    best = db / "tune" / "s" / "best.json"
    record_ = json.loads(best.read_text())
    if record_["config"].get("baseline") and RecordDB(db).kernels[0].provenance == "ptx":
        record_["config"] = {}
    best.write_text(json.dumps({**record_, "beats_application": True}))
    run(["mneme", "export", "-rdb", str(db), "--bundle", str(tmp_path / "bundle")])
    report = tmp_path / "report.json"
    out = run(["mneme", "run", "--tuned", str(tmp_path / "bundle"), "--report", str(report),
               "--", *command])
    assert out.stdout == native
    (mine,) = [k for k in json.loads(report.read_text())["kernels"] if k["kernel"] == kernel]
    assert mine["served"] >= 1 and mine["served"] == mine["launches"], mine


def test_a_cupy_raw_kernel_records_replays_tunes_and_is_served(tmp_path):
    """NVRTC's PTX, loaded by CuPy through the driver (where CuPy is installed)."""
    pytest.importorskip("cupy")
    import sys

    from conftest import ANYKERNEL, tool_env

    env = tool_env(CUPY_COMPILE_WITH_PTX="1", CUPY_CACHE_DIR=str(tmp_path / "cupy-cache"))
    command = [sys.executable, str(ANYKERNEL / "cupy_smooth.py")]
    native = run(command, env=env).stdout
    db = tmp_path / "db"
    recorded = run(["mneme", "record", "-rdb", str(db), "--", *command], env=env)
    assert recorded.stdout == native and "checksum" in native
    kernel = RecordDB(db).kernel("smooth")
    assert kernel.provenance == "ptx"
    check(RecordDB(db))
    run(["mneme", "tune", "-rdb", str(db), "--kernel", "smooth", "--timeout", "5", "--study",
         "s"], env=env)
    best = db / "tune" / "s" / "best.json"
    record_ = json.loads(best.read_text())
    if record_["config"].get("baseline"):
        record_["config"] = {}
    best.write_text(json.dumps({**record_, "beats_application": True}))
    run(["mneme", "export", "-rdb", str(db), "--bundle", str(tmp_path / "bundle")], env=env)
    report = tmp_path / "report.json"
    out = run(["mneme", "run", "--tuned", str(tmp_path / "bundle"), "--report", str(report),
               "--", *command], env=env)
    assert out.stdout == native
    (mine,) = [k for k in json.loads(report.read_text())["kernels"] if k["kernel"] == "smooth"]
    assert mine["served"] == mine["launches"] >= 1, mine


def test_a_triton_kernel_records_and_replays(tmp_path):
    """Triton's cubin, compiled at run time and loaded through the driver
    (where Triton and PyTorch are installed): recorded with the program's
    output unchanged, and every instance bitwise with the image."""
    pytest.importorskip("triton")
    import sys

    from conftest import ANYKERNEL, tool_env

    env = tool_env(TRITON_CACHE_DIR=str(tmp_path / "triton-cache"))
    command = [sys.executable, str(ANYKERNEL / "triton_axpy.py")]
    native = run(command, env=env).stdout
    db = tmp_path / "db"
    recorded = run(["mneme", "record", "-rdb", str(db), "--kernels", "axpy", "--", *command],
                   env=env)
    assert recorded.stdout == native and "checksum" in native
    kernel = RecordDB(db).kernel("axpy")
    assert kernel.provenance in ("cubin", "ptx")
    check(RecordDB(db))
