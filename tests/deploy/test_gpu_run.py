"""GPU tier: `mneme run --tuned` serves a tuned kernel inside the real
application, passes everything else through, and says why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run, tool_env

pytestmark = pytest.mark.gpu

#: CG's SpMV (the suite's most tunable kernel), at a size whose every
#: iteration launches it at one shape.
APP, ARGS, KERNEL = "cg", ["24", "20"], "_Z4spmv"


def tuned_bundle(app: Path, args: list[str], kernel: str, tmp: Path, budget: int) -> Path:
    """APP recorded, KERNEL (one instance) tuned for a short budget and exported."""
    env = tool_env(MNEME_CACHE_DIR=str(tmp / "cache"))
    db = tmp / "rdb"
    run(["mneme", "record", "-rdb", str(db), "--kernels", f"^{kernel}", "--max-instances",
         "1", "--", str(app), *args])
    run(["mneme", "tune", "-rdb", str(db), "--timeout", str(budget), "--study", "deploy"],
        env=env)
    # Serving is under test whatever the speedup: a winner that did not beat
    # the application is bundled all the same, and when the application's own
    # kernel won, its IR compiled at the build's settings (bitwise, as replay
    # guarantees) stands in.
    best = db / "tune" / "deploy" / "best.json"
    record = json.loads(best.read_text())
    if record["config"].get("baseline"):
        from mneme_cc.replay.config import ReplayConfig

        record["config"] = ReplayConfig().to_dict()
    best.write_text(json.dumps({**record, "beats_application": True}))
    run(["mneme", "export", "-rdb", str(db), "--bundle", str(tmp / "bundle")], env=env)
    return tmp / "bundle"


@pytest.fixture(scope="module")
def served(example_binaries, tmp_path_factory):
    """CG's SpMV tuned and bundled; the application's native output."""
    tmp = tmp_path_factory.mktemp("deploy")
    app = example_binaries / APP
    bundle = tuned_bundle(app, ARGS, KERNEL, tmp, 20)
    return app, bundle, run([str(app), *ARGS]).stdout, tmp


def serve(app: Path, bundle: Path, report: Path, *extra: str, args=ARGS):
    out = run(["mneme", "run", "--tuned", str(bundle), "--report", str(report), *extra, "--",
               str(app), *args])
    return out, json.loads(report.read_text())


def kernel_of(doc: dict, prefix: str) -> dict:
    (found,) = [k for k in doc["kernels"] if k["kernel"].startswith(prefix)]
    return found


def test_every_launch_of_the_tuned_kernel_is_served_and_the_output_is_the_applications(served):
    app, bundle, native, tmp = served
    out, doc = serve(app, bundle, tmp / "report.json")
    assert out.stdout == native
    assert doc["exit_status"] == 0 and doc["processes"] == 1
    spmv = kernel_of(doc, KERNEL)
    assert spmv["tuned"] and spmv["launches"] > 0
    assert spmv["served"] == spmv["launches"] and spmv["passed_through"] == {}
    assert spmv["kernel_ms"] > 0 and spmv["timed_launches"] == spmv["launches"]
    others = [k for k in doc["kernels"] if not k["tuned"]]
    assert others and all(k["served"] == 0 and k["passed_through"] == {"not tuned":
                                                                        k["launches"]}
                          for k in others)
    # Untuned kernels are timed only when asked.
    assert all(k["kernel_ms"] is None for k in others)
    assert "served from" in out.stderr and "mneme: warning" not in out.stderr


def test_time_kernels_times_every_kernel(served):
    app, bundle, native, tmp = served
    out, doc = serve(app, bundle, tmp / "timed.json", "--time-kernels")
    assert out.stdout == native
    assert all(k["kernel_ms"] is not None and k["kernel_ms"] > 0
               for k in doc["kernels"] if k["launches"])


@pytest.mark.parametrize("damage, warning", [
    ("ir", "the kernel's IR changed since it was tuned"),
    ("arch", "tuned for another GPU (sm_10, not sm_"),
    ("cubin", "its cubin is missing or damaged"),
])
def test_a_mismatched_bundle_passes_through_with_one_warning(served, damage, warning):
    app, bundle, native, tmp = served
    copy = tmp / f"bundle-{damage}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(bundle, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (entry,) = manifest["kernels"]
    if damage == "ir":
        entry["ir_sha256"] = "0" * 64
    elif damage == "arch":
        entry["arch"] = "sm_10"
    else:
        (copy / entry["cubin"]).unlink()
    (copy / "manifest.json").write_text(json.dumps(manifest))
    out, doc = serve(app, copy, tmp / f"{damage}.json")
    assert out.stdout == native and doc["exit_status"] == 0
    warnings = [line for line in out.stderr.splitlines()
                if line.startswith("mneme: warning:") and warning in line]
    assert len(warnings) == 1, out.stderr
    if damage == "cubin":
        assert entry["cubin"] in warnings[0]
    spmv = kernel_of(doc, KERNEL)
    assert spmv["served"] == 0
    (reason,) = spmv["passed_through"]
    assert warning in reason and spmv["passed_through"][reason] == spmv["launches"]


def test_another_problem_size_at_the_same_shape_is_served_unless_specialised(served):
    # CG launches SpMV at one grid whatever its size (a grid-stride loop), so
    # another size matches the recorded shape exactly.
    app, bundle, _, tmp = served
    args = ["20", "20"]
    native = run([str(app), *args]).stdout
    out, doc = serve(app, bundle, tmp / "other-size.json", args=args)
    spmv = kernel_of(doc, KERNEL)
    assert out.stdout == native
    assert spmv["served"] + sum(spmv["passed_through"].values()) == spmv["launches"] > 0
    assert all("specialised" in reason for reason in spmv["passed_through"])


@pytest.fixture(scope="module")
def stencil(example_binaries, tmp_path_factory):
    """stencil3d at N=32 (its grid grows with N) tuned and bundled."""
    app, args, kernel = example_binaries / "stencil3d", ["32"], "_Z9stencil3dIfLi1E"
    return app, args, kernel, tuned_bundle(app, args, kernel,
                                           tmp_path_factory.mktemp("stencil"), 15)


def test_another_launch_shape_passes_through_unless_nearest_is_asked(stencil, tmp_path):
    app, _, kernel, bundle = stencil
    args = ["24"]
    native = run([str(app), *args]).stdout
    out, doc = serve(app, bundle, tmp_path / "exact.json", args=args)
    found = kernel_of(doc, kernel)
    assert out.stdout == native and found["served"] == 0 and found["launches"] > 0
    assert any("no entry for this launch shape" in r for r in found["passed_through"])
    out, doc = serve(app, bundle, tmp_path / "nearest.json", "--match", "nearest", args=args)
    found = kernel_of(doc, kernel)
    assert out.stdout == native
    assert found["served"] + sum(found["passed_through"].values()) == found["launches"]
    # Served, unless the winner was specialised on the recorded size's values
    # or shape, or its tuned geometry does not fit this size.
    allowed = ("specialised", "does not carry over", "launch was refused")
    assert all(any(a in reason for a in allowed) for reason in found["passed_through"])
    if not found["passed_through"]:
        assert found["served"] == found["launches"]


def test_an_application_failure_is_its_own(served):
    app, bundle, _, tmp = served
    out = run(["mneme", "run", "--tuned", str(bundle), "--", str(app), "not-a-number"],
              check=False)
    native = run([str(app), "not-a-number"], check=False)
    assert out.returncode == native.returncode != 0
    assert "mneme: error" not in out.stderr and native.stderr.strip() in out.stderr


def test_a_kernel_reading_device_globals_computes_with_the_applications_values(
        stencil, tmp_path):
    # stencil3d reads its weights from __constant__ memory and a scale from a
    # __device__ global, which the application sets; the cubin has its own.
    app, args, kernel, bundle = stencil
    out, doc = serve(app, bundle, tmp_path / "report.json", args=args)
    assert out.stdout == run([str(app), *args]).stdout
    found = kernel_of(doc, kernel)
    assert found["launches"] > 0 and found["served"] == found["launches"]
