"""Projects written for nvcc build unchanged with mneme-nvcc, or fail loudly.

tests/samples/reach is a CMake project of the layouts that nvcc builds and
clang's CUDA support alone does not: separable compilation left on, a
target mixing C++ and CUDA sources (CMake links it with the C++ compiler),
CUDA static and shared libraries in C++ programs, dynamic parallelism,
sm_110 in the arch list (PTX 9.0), nvcc's host min/max, a header guarded by
`!defined(__NVCC__)`, a static `__constant__` table the host fills by name,
device-side new/delete of classes with pure virtual functions, nan().
tests/samples/rdc has the hand-written `-dlink` Makefile.  test_gpu_reach.py
runs them against nvcc's builds.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import RDC, REACH_KERNELS, build_reach, check_device_link, inspect_json, run

from mneme_cc import _native
from mneme_cc.drivers import toolchain
from mneme_cc.replay.compiling.cubin import compile_cubin, launches_kernels
from mneme_cc.replay.config import ReplayConfig


@pytest.fixture(scope="module")
def reach(tmp_path_factory) -> Path:
    return build_reach(tmp_path_factory.mktemp("reach"))


def test_cmake_drives_mneme_nvcc_as_nvcc(reach):
    (identified,) = reach.joinpath("CMakeFiles").glob("*/CMakeCUDACompiler.cmake")
    text = identified.read_text()
    assert 'set(CMAKE_CUDA_COMPILER_ID "NVIDIA")' in text
    assert re.search(r'set\(CMAKE_CUDA_HOST_LINK_LAUNCHER ".*/mneme-cxx"\)', text)
    # CMake's own steps, as for nvcc: the mixed target and the C++ program are
    # linked by the C++ compiler after a device link by `mneme-nvcc -dlink`.
    for target in ("mixed", "histo_app"):
        link = (reach / "CMakeFiles" / f"{target}.dir" / "link.txt").read_text()
        assert "mneme" not in link.split()[0] and "cmake_device_link.o" in link
        assert " -dlink " in (reach / "CMakeFiles" / f"{target}.dir" / "dlink.txt").read_text()


@pytest.mark.parametrize("program", sorted(REACH_KERNELS))
def test_every_layout_carries_its_kernels_and_registers_them(reach, program):
    modules = inspect_json(reach / program)["modules"]
    for arch in ("sm_90", "sm_110"):  # the project's arch list
        (linked,) = [m for m in modules if m.get("linked") and m["arch"] == arch]
        assert {k["name"] for k in linked["kernels"]} == REACH_KERNELS[program]
    check_device_link(reach / program)
    assert "libcudart.so" in run(["readelf", "-d", str(reach / program)]).stdout


def test_a_kernel_that_launches_kernels_replays_linked_with_the_device_runtime(reach, tmp_path):
    run(["mneme", "inspect", "--ptx", str(tmp_path), str(reach / "dp")])
    (ptx,) = tmp_path.glob("*.linked.sm_90.ptx")
    text = ptx.read_text()
    assert launches_kernels(text)
    ptxas = toolchain.require_cuda_toolkit() / "bin" / "ptxas"
    # The toolkit's ptxas (a relocatable cubin, then nvJitLink's device link), or nvJitLink alone.
    for assembler in ([ptxas] if ptxas.is_file() else []) + [None]:
        cubin = compile_cubin(text, "_Z6parentPiii", ReplayConfig(), "sm_90", assembler)
        assert cubin.data[:4] == b"\x7fELF" and cubin.resources.registers > 0


def test_a_link_that_forgets_the_device_link_fails(tmp_path):
    objects = []
    for name in ("main", "integrate", "physics"):
        objects.append(tmp_path / f"{name}.o")
        run(["mneme-nvcc", "-arch=sm_90", "-dc", "-Xcompiler", "-fPIC", str(RDC / f"{name}.cu"),
             "-o", str(objects[-1])])
    cudart = ["-L/usr/local/cuda/lib64", "-lcudart"]
    for shared in ([], ["-shared"]):
        proc = run(["g++", *shared, *map(str, objects), *cudart, "-o", str(tmp_path / "app")],
                   check=False)
        assert proc.returncode != 0
        assert _native.DEVICE_LINK_SYMBOL in proc.stderr
        assert "link_with_mneme_nvcc_or_run_mneme_nvcc_dlink" in _native.DEVICE_LINK_SYMBOL
    # With the device link, nvcc's way, the host compiler's link works.
    run(["mneme-nvcc", "-arch=sm_90", "-dlink", *map(str, objects), "-o", str(tmp_path / "gpu.o")])
    run(["g++", *map(str, objects), str(tmp_path / "gpu.o"), *cudart, "-o", str(tmp_path / "app")])
    check_device_link(tmp_path / "app")
    (linked,) = [m for m in inspect_json(tmp_path / "app")["modules"] if m.get("linked")]
    assert {k["name"] for k in linked["kernels"]} == {"_Z4initPfS_i", "_Z9integratePfS_if"}
    # mneme-nvcc's own link sees the device link done and does not do it twice.
    run(["mneme-nvcc", *map(str, objects), str(tmp_path / "gpu.o"), "-o", str(tmp_path / "app2")])
    assert run(["readelf", "-S", "-W", str(tmp_path / "app2")]).stdout.count(".nv_fatbin") == 1


def test_dlink_errors_are_one_line(tmp_path):
    missing = run(["mneme-nvcc", "-dlink", str(tmp_path / "nope.o"), "-o", str(tmp_path / "g.o")],
                  check=False)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "nope.o does not exist" in missing.stderr
    source = run(["mneme-nvcc", "-dlink", str(RDC / "main.cu")], check=False)
    assert source.returncode == 2 and "compile" in source.stderr and "-dc" in source.stderr


def test_host_code_has_nvcc_s_min_and_max(tmp_path):
    source = tmp_path / "host.cu"
    source.write_text("""
#include <cstdio>
int main() {
  unsigned u = 7;
  std::printf("%g %g %d %u %lld\\n", min(2.5f, 1.5f), max(2.0, 3.0f), max(-1, 4), min(u, 9),
              max(3LL, -2LL));
}
""")
    run(["mneme-nvcc", str(source), "-o", str(tmp_path / "host")])
    printed = run([str(tmp_path / "host")]).stdout
    assert printed == "1.5 3 4 7 3\n"
    nvcc = toolchain.require_cuda_toolkit() / "bin" / "nvcc"
    if nvcc.is_file():  # the same program built by nvcc prints the same
        run([str(nvcc), str(source), "-o", str(tmp_path / "host_nvcc")])
        assert run([str(tmp_path / "host_nvcc")]).stdout == printed


def test_an_arch_that_needs_a_newer_ptx(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n")
    run(["mneme-nvcc", "-arch=sm_110", "-ptx", str(source), "-o", str(tmp_path / "k.ptx")])
    assert ".version 9.0" in (tmp_path / "k.ptx").read_text()
    run(["mneme-cxx", "--cuda-gpu-arch=sm_110", "-c", str(source), "-o", str(tmp_path / "k.o")])
    assert {m["arch"] for m in inspect_json(tmp_path / "k.o")["modules"]} == {"sm_110"}


def test_nvcc_s_macros(tmp_path):
    source = tmp_path / "m.cu"
    source.write_text("int v = __NVCC__ + __CUDACC_VER_MAJOR__ * 0;\n"
                      "#ifdef __CUDACC_RDC__\nint rdc;\n#endif\n")
    whole = run(["mneme-nvcc", "-E", str(source)]).stdout
    assert "int v = 1 + " in whole and "int rdc" not in whole
    assert "int rdc" in run(["mneme-nvcc", "-rdc=true", "-E", str(source)]).stdout
    # The user's -U wins over nvcc's own macro.
    assert "__NVCC__ +" in run(["mneme-nvcc", "-U__NVCC__", "-E", str(source)]).stdout
