"""GPU tier: a mneme-cc build computes exactly what clang's and nvcc's do.

The multi sample is built three ways (mneme-cxx, plain clang, nvcc) and run;
all three outputs must equal each other and the output a host reference
computes here, independently of any GPU code.

On a GPU machine without clang, point MNEME_PREBUILT at a directory holding
`mneme/` and `clang/` Makefile builds made elsewhere (see bench/README.md).
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import MULTI, build_print_hook, run, tool_env

from mneme_cc.drivers import toolchain

N = 100000


def fnv1a(array: np.ndarray) -> int:
    h = 0xCBF29CE484222325
    for byte in array.tobytes():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def expected_output(n: int) -> str:
    """What app/main.cu prints, computed on the host from its definition."""
    i = np.arange(n)
    coeffs = np.array([1.0, 2.0, 0.5, 4.0], dtype=np.float32)[i & 3]
    f = (i % 64).astype(np.float32) * np.float32(2) * coeffs + np.float32(3)
    k = (i % 1000) * 3 * coeffs.astype(np.int32) + 3
    k = k.astype(np.int32)
    padded = np.concatenate([[0], f, [0]]).astype(np.float32)
    g = (np.float32(0.25) * padded[:-2] + np.float32(0.5) * padded[1:-1]
         + np.float32(0.25) * padded[2:]).astype(np.float32)
    bins = np.bincount(k % 16, minlength=16).astype(np.uint32)
    return "".join([
        f"n={n}\n",
        f"scaled float  {fnv1a(f):016x} first={f[0]:g} last={f[-1]:g}\n",
        f"scaled int    {fnv1a(k):016x} first={k[0]} last={k[-1]}\n",
        f"stencil       {fnv1a(g):016x} mid={g[n // 2]:g}\n",
        f"histogram     {fnv1a(bins):016x} bin0={bins[0]}\n",
    ])


def clang_builds(tmp_path: Path) -> dict[str, Path]:
    prebuilt = os.environ.get("MNEME_PREBUILT")
    if prebuilt:
        return {name: Path(prebuilt) / name for name in ("mneme", "clang")}
    if not shutil.which("clang-22") and not os.environ.get("MNEME_CLANG"):
        pytest.fail("the GPU tier needs builds of the multi sample: clang-22 here, or "
                    "MNEME_PREBUILT with builds made elsewhere (bench/README.md)")
    toolkit = toolchain.require_cuda_toolkit()
    run(["make", "-j4", f"BUILD={tmp_path / 'mneme'}"], cwd=MULTI)
    plain_flags = shlex.join([*toolchain.cuda_compile_flags(toolkit, plugin=None),
                              "--cuda-gpu-arch=sm_90"])
    run(["make", "-j4", f"BUILD={tmp_path / 'clang'}", f"CXX={toolchain.select_clang()}++",
         f"CUDAFLAGS={plain_flags}", f"LDLIBS={shlex.join(toolchain.cuda_link_flags(toolkit))}"],
        cwd=MULTI)
    return {"mneme": tmp_path / "mneme", "clang": tmp_path / "clang"}


@pytest.mark.gpu
def test_mneme_build_runs_like_clang_and_nvcc(tmp_path):
    builds = clang_builds(tmp_path)
    run(["make", "-j4", f"BUILD={tmp_path / 'nvcc'}", "CXX=nvcc", "PIC=-Xcompiler=-fPIC",
         "CUDAFLAGS=-arch=sm_90 -cudart shared", "RPATH="], cwd=MULTI)
    builds["nvcc"] = tmp_path / "nvcc"

    # The mneme build really is the recordable one.
    inspected = run(["mneme", "inspect", str(builds["mneme"] / "multi_app")]).stdout
    assert "_Z4fillPfPii" in inspected

    outputs = {}
    for name, build in builds.items():
        env = tool_env(LD_LIBRARY_PATH=f"{build}:{os.environ.get('LD_LIBRARY_PATH', '')}")
        outputs[name] = run([str(build / "multi_app"), str(N)], env=env).stdout
    reference = expected_output(N)
    assert outputs["mneme"] == reference, outputs
    assert outputs["clang"] == reference
    assert outputs["nvcc"] == reference

    # With a recorder's hook loaded, the modules are handed over and the
    # application still computes exactly the same.
    hook = build_print_hook(tmp_path)
    env = tool_env(LD_PRELOAD=str(hook))
    hooked = run([str(builds["mneme"] / "multi_app"), str(N)], env=env)
    assert hooked.stdout == reference
    assert hooked.stderr.count("hook: ") == 3
