"""The runtime's serving mode end to end on the CPU: the preloaded runtime
between an application and stand-ins for the CUDA runtime and driver
(tests/samples/serve), which print every launch as `native ...` (the
application's kernel) or `served ...` (the tuned cubin, with its geometry)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import SAMPLES, run, tool_env

from mneme_cc import _native

KERNEL = "_Z4kernPfi"
BITCODE = b"BC\xc0\xde the module defining kern"
SERVE = SAMPLES / "serve"


@pytest.fixture(scope="module")
def fake(tmp_path_factory) -> Path:
    """The stand-in driver and runtime, the application, and its embedded IR."""
    from mneme_cc.drivers.toolchain import find_cuda_toolkit

    toolkit = find_cuda_toolkit()
    if toolkit is None:
        pytest.skip("no CUDA toolkit: the application needs the runtime's header")
    out = tmp_path_factory.mktemp("fake")
    run(["g++", "-shared", "-fPIC", "-std=c++17", str(SERVE / "fake_cuda.cpp"), "-o",
         str(out / "libcuda.so.1")])
    run(["g++", "-shared", "-fPIC", "-std=c++17", str(SERVE / "fake_cudart.cpp"), "-o",
         str(out / "libfakecudart.so")])
    run(["g++", "-std=c++17", f"-I{toolkit / 'include'}", str(SERVE / "app.cpp"), "-o",
         str(out / "app"), f"-L{out}", "-lfakecudart", f"-Wl,-rpath,{out}", "-ldl"])
    metadata = json.dumps({"arch": "sm_90", "kernels": [{"name": KERNEL}]},
                          separators=(",", ":"))
    (out / "ir.bin").write_bytes(_native.encode_embedded_ir(metadata, BITCODE))
    return out


def bundle(where: Path, *entries: dict, cubin: bytes = b"CUBIN of kern") -> Path:
    where.mkdir()
    (where / "k.cubin").write_bytes(cubin)
    base = {"kernel": KERNEL, "demangled": "kern(float*, int)", "arch": "sm_90",
            "ir_sha256": hashlib.sha256(BITCODE).hexdigest(),
            "launch": {"grid": [4, 1, 1], "block": [256, 1, 1], "shared_mem_bytes": 0},
            "serve": {"grid": [2, 1, 1], "block": [512, 1, 1], "shared_mem_bytes": 0},
            "cubin": "k.cubin", "cubin_sha256": hashlib.sha256(cubin).hexdigest(),
            "config": {}, "outcome": "verified", "median_ms": 1.0, "baseline_ms": 1.2,
            "speedup": 1.2, "instance": "0123456789abcdef", "device": "Fake GPU"}
    (where / "manifest.json").write_text(json.dumps(
        {"format": "mneme-bundle", "version": 1,
         "kernels": [{**base, **e} for e in (entries or ({},))]}))
    return where


def serve(fake: Path, tuned: Path, *launches: str, options=(), cc: str = "90",
          exit_status: int = 0):
    report = tuned.parent / f"{tuned.name}-report.json"
    env = tool_env(LD_LIBRARY_PATH=str(fake), FAKE_CC=cc, FAKE_EXIT=str(exit_status))
    out = run(["mneme", "run", "--tuned", str(tuned), "--report", str(report), *options, "--",
               str(fake / "app"), str(fake / "ir.bin"), *launches], env=env, check=False)
    doc = json.loads(report.read_text())
    kernels = {k["kernel"]: k for k in doc["kernels"]}
    return out, doc, kernels


def launched(out) -> list[str]:
    return [line for line in out.stdout.splitlines() if line.split()[0] in ("native", "served")]


def warnings(out) -> list[str]:
    return [line for line in out.stderr.splitlines() if line.startswith("mneme: warning:")]


def test_exact_launches_run_the_tuned_cubin_with_its_geometry(fake, tmp_path):
    out, doc, kernels = serve(fake, bundle(tmp_path / "b"), "4,256,0,7", "8,256,0,7",
                              "4,256,0,9", exit_status=5)
    assert out.returncode == 5 and doc["exit_status"] == 5 and doc["processes"] == 1
    # The cubin's copy of the device global it uses travels with each launch.
    lines = out.stdout.splitlines()
    first = lines.index(f"served {KERNEL} 2,1,1 512,1,1 0 n=7")
    assert lines[first - 1:first + 2] == ["copy c0de <- a9 4", lines[first], "copy a9 <- c0de 4"]
    assert sum(line.startswith("copy") for line in lines) == 4
    assert launched(out) == [f"served {KERNEL} 2,1,1 512,1,1 0 n=7",
                             f"native {KERNEL} 8,1,1 256,1,1 0 n=7",
                             f"served {KERNEL} 2,1,1 512,1,1 0 n=9",
                             "native _Z5otherv 1,1,1 32,1,1 0 n=0"]
    assert out.stdout.count("load module") == 1 and not warnings(out)
    kern, other = kernels[KERNEL], kernels["_Z5otherv"]
    assert (kern["launches"], kern["served"]) == (3, 2)
    assert kern["passed_through"] == {
        "no entry for this launch shape (--match nearest serves the closest)": 1}
    # The stand-in driver measures 1.5 ms for every launch; only tuned kernels are timed.
    assert (kern["served_ms"], kern["passed_through_ms"], kern["kernel_ms"]) == (3.0, 1.5, 4.5)
    assert other["passed_through"] == {"not tuned": 1} and other["kernel_ms"] is None


def test_nearest_serves_other_shapes_and_time_kernels_times_everything(fake, tmp_path):
    out, _, kernels = serve(fake, bundle(tmp_path / "b"), "8,256,0,7", "3,256,0,7",
                            options=("--match", "nearest", "--time-kernels"))
    assert launched(out)[:2] == [f"served {KERNEL} 4,1,1 512,1,1 0 n=7",
                                 f"native {KERNEL} 3,1,1 256,1,1 0 n=7"]
    assert kernels[KERNEL]["passed_through"] == {
        "the tuned geometry does not carry over to this launch shape": 1}
    assert kernels["_Z5otherv"]["kernel_ms"] == 1.5


def test_specialised_arguments_are_served_only_at_their_values(fake, tmp_path):
    seven = (7).to_bytes(4, "little").hex()
    tuned = bundle(tmp_path / "b", {"config": {"specialize_args": [1]},
                                    "specialized_args": [{"index": 1, "hex": seven}]})
    out, _, kernels = serve(fake, tuned, "4,256,0,7", "4,256,0,8")
    assert [line.split()[0] for line in launched(out)[:2]] == ["served", "native"]
    assert kernels[KERNEL]["passed_through"] == {
        "argument 1 differs from the value the tuned cubin was specialised on": 1}


@pytest.mark.parametrize("index, size", [(1, 8), (3000, 4)])
def test_a_specialised_argument_the_kernel_has_not_passes_through(fake, tmp_path, index, size):
    """The bundle is untrusted: an index past the kernel's parameters, or a value
    of another size, is never read from the launch's arguments."""
    value = (7).to_bytes(size, "little").hex()
    tuned = bundle(tmp_path / "b", {"config": {"specialize_args": [index]},
                                    "specialized_args": [{"index": index, "hex": value}]})
    out, _, kernels = serve(fake, tuned, "4,256,0,7")
    assert [line.split()[0] for line in launched(out)[:1]] == ["native"]
    assert kernels[KERNEL]["passed_through"] == {
        f"the bundle specialises argument {index}, which the kernel has not with that size": 1}


def test_large_dynamic_shared_memory_is_asked_for(fake, tmp_path):
    shape = {"grid": [4, 1, 1], "block": [256, 1, 1], "shared_mem_bytes": 100_000}
    out, _, kernels = serve(fake, bundle(tmp_path / "b", {"launch": shape, "serve": shape}),
                            "4,256,100000,7")
    assert "max dynamic shared memory 100000" in out.stdout
    assert kernels[KERNEL]["served"] == 1


@pytest.mark.parametrize("case, warning", [
    ("ir", "the kernel's IR changed since it was tuned"),
    ("arch", "tuned for another GPU (sm_90, not sm_80)"),
    ("load", "the tuned cubin 0.cubin does not load (CUDA_ERROR_INVALID_IMAGE)"),
    ("refused", "the tuned cubin's launch was refused (CUDA_ERROR_INVALID_VALUE)"),
    ("digest", "k.cubin: does not match its digest"),
    ("no-ir", "the application carries no IR for it"),
])
def test_what_cannot_be_served_passes_through_with_one_warning(fake, tmp_path, case, warning):
    entry: dict = {}
    cubin = b"CUBIN of kern"
    if case == "ir":
        entry = {"ir_sha256": "0" * 64}
    elif case == "load":
        cubin = b"BAD cubin"
    elif case == "refused":
        entry = {"serve": {"grid": [1, 1, 1], "block": [2048, 1, 1], "shared_mem_bytes": 0}}
    elif case == "no-ir":
        entry = {"kernel": "_Z5otherv"}
    tuned = bundle(tmp_path / "b", entry, cubin=cubin)
    if case == "digest":
        (tuned / "k.cubin").write_bytes(b"CUBIN, changed")
    out, doc, kernels = serve(fake, tuned, "4,256,0,7", "4,256,0,7",
                              cc="80" if case == "arch" else "90")
    assert out.returncode == 0
    (line,) = warnings(out)
    assert warning in line and line.endswith("its launches pass through")
    name = "_Z5otherv" if case == "no-ir" else KERNEL
    assert all(x.startswith("native") for x in launched(out))
    ((reason, count),) = kernels[name]["passed_through"].items()
    assert warning in reason and count == kernels[name]["launches"]
    assert kernels[name]["served"] == 0


def test_every_launch_api_is_served_but_launches_with_attributes(fake, tmp_path):
    out, _, kernels = serve(fake, bundle(tmp_path / "b"), "x:4,256,0,7", "h:4,256,0,7",
                            "a:4,256,0,7")
    assert [line.split()[0] for line in launched(out)[:3]] == ["served", "served", "native"]
    assert kernels[KERNEL]["served"] == 2
    ((reason, count),) = kernels[KERNEL]["passed_through"].items()
    assert reason.startswith("launched with attributes") and count == 1


def test_a_runtime_opened_with_rtld_local_is_found(fake, tmp_path):
    """A CUDA runtime that only a plugin opened with RTLD_LOCAL depends on (a
    Python extension's) is not next in the global scope; it still runs."""
    from mneme_cc.drivers.toolchain import find_cuda_toolkit

    include = f"-I{find_cuda_toolkit() / 'include'}"
    run(["g++", "-shared", "-fPIC", "-std=c++17", include, str(SERVE / "plugin.cpp"), "-o",
         str(tmp_path / "libplugin.so"), f"-L{fake}", "-lfakecudart", f"-Wl,-rpath,{fake}"])
    run(["g++", "-std=c++17", str(SERVE / "dlapp.cpp"), "-o", str(tmp_path / "dlapp"), "-ldl"])
    env = tool_env(LD_LIBRARY_PATH=str(fake))
    out = run(["mneme", "run", "--tuned", str(bundle(tmp_path / "b")), "--",
               str(tmp_path / "dlapp"), str(tmp_path / "libplugin.so")], env=env, check=False)
    assert out.returncode == 0, out.stderr
    assert "plugin launch returned 0" in out.stdout
