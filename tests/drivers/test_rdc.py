"""Relocatable device code: every object keeps its IR, and the program's link
embeds one module per arch linked from all of them (tests/samples/rdc)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import (
    RDC,
    build_print_hook,
    build_rdc_sample,
    check_device_link,
    inspect_json,
    nvcc_wrapper,
    run,
    tool_env,
)

SAMPLE = RDC
KERNELS = {"_Z4initPfS_i", "_Z9integratePfS_if"}
CALLEE = "_Z4dragf"  # physics.cu's drag(float), called by integrate.cu
GLOBALS = {"g_gravity", "g_bounces"}  # defined in physics.cu, used elsewhere


def inspect(binary: Path) -> list[dict]:
    return inspect_json(binary)["modules"]


def linked_definitions(binary: Path, tmp_path: Path) -> tuple[dict, set[str]]:
    """The linked module's metadata, and the symbols its extracted bitcode defines."""
    import llvmlite.binding as llvm

    out = tmp_path / "extracted"
    run(["mneme", "inspect", "--extract", str(out), str(binary)])
    (bitcode,) = out.glob("*.linked.sm_90.bc")
    meta = json.loads(bitcode.with_suffix(".json").read_text())
    module = llvm.parse_bitcode(bitcode.read_bytes())
    defined = {v.name for v in [*module.functions, *module.global_variables]
               if not v.is_declaration}
    return meta, defined


def check_program(binary: Path, tmp_path: Path) -> None:
    """The device link ran, every kernel is listed, and the linked module
    defines the other TUs' symbols."""
    check_device_link(binary)
    assert "__cudaRegisterVar" in run(["nm", "-D", "-u", str(binary)]).stdout  # its globals
    modules = inspect(binary)
    assert {k["name"] for m in modules for k in m["kernels"]} == KERNELS
    (linked,) = [m for m in modules if m.get("linked")]
    assert {k["name"] for k in linked["kernels"]} == KERNELS
    assert {g["name"] for g in linked["globals"]} == GLOBALS
    assert sorted(Path(s).name for s in linked["linked_sources"]) == \
        ["integrate.cu", "main.cu", "physics.cu"]
    meta, defined = linked_definitions(binary, tmp_path)
    assert {CALLEE, *KERNELS, *GLOBALS} <= defined
    assert meta["arch"] == "sm_90"
    # The TU's own module only declares what the link resolved.
    (own,) = [m for m in modules if m["source"].endswith("integrate.cu")]
    assert not own.get("linked")


@pytest.mark.parametrize("opt", ["-O3", "-O0"])
def test_makefile_written_for_nvcc(opt, tmp_path):
    out = tmp_path / "build"
    run(["make", "-j2", f"NVCC={nvcc_wrapper(tmp_path)}", f"OPT={opt}", f"BUILD={out}"], cwd=SAMPLE)
    check_program(out / "rdc_sample", tmp_path)
    # The device library keeps its members' IR and nothing of the link's.
    members = {m["origin"] for m in inspect(out / "libphysics.a")}
    assert members == {f"{out / 'libphysics.a'}(physics.o)"}


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc is not installed")
def test_the_sample_is_valid_nvcc_input(tmp_path):
    out = tmp_path / "build"
    run(["make", "-j2", "NVCC=nvcc", f"BUILD={out}"], cwd=SAMPLE)
    # nvcc's program carries its fatbinary as mneme's builds do (it links the
    # static runtime, so registration is no import there).
    assert ".nv_fatbin" in run(["readelf", "-S", "-W", str(out / "rdc_sample")]).stdout


def compile_rdc(tmp_path: Path, *extra: str) -> dict[str, Path]:
    objects = {}
    for name in ("main", "integrate", "physics"):
        objects[name] = tmp_path / f"{name}.o"
        run(["mneme-cxx", "-fgpu-rdc", "-O2", *extra, "-c", str(SAMPLE / f"{name}.cu"),
             "-o", str(objects[name])])
    return objects


def test_mneme_cxx_fgpu_rdc_with_a_static_library(tmp_path):
    objects = compile_rdc(tmp_path)
    # A member nothing needs stays out of the linked module, as out of the program.
    unused = tmp_path / "unused.cu"
    unused.write_text("__device__ float unused_helper(float x) { return x + 1.0f; }\n")
    run(["mneme-cxx", "-fgpu-rdc", "-c", str(unused), "-o", str(tmp_path / "unused.o")])
    run(["ar", "rcs", str(tmp_path / "libphysics.a"), str(objects["physics"]),
         str(tmp_path / "unused.o")])
    app = tmp_path / "app"
    # No -fgpu-rdc and no CUDA runtime named at the link: the driver adds both.
    run(["mneme-cxx", str(objects["main"]), str(objects["integrate"]), f"-L{tmp_path}",
         "-lphysics", "-o", str(app)])
    check_program(app, tmp_path)
    needed = run(["readelf", "-d", str(app)]).stdout
    assert "libcudart.so" in needed


def test_one_command_compiles_and_links(tmp_path):
    app = tmp_path / "app"
    sources = [str(SAMPLE / f"{name}.cu") for name in ("main", "integrate", "physics")]
    run(["mneme-cxx", "-fgpu-rdc", "-O2", f"-I{SAMPLE}", *sources, "-o", str(app)],
        env=tool_env(TMPDIR=str(tmp_path)))
    check_program(app, tmp_path)
    # The objects it compiled on the way are gone.
    assert not list(tmp_path.glob("mneme-rdc-*")) and not list(tmp_path.glob("mneme-link-*"))
    assert not list(tmp_path.glob("mneme-handoff-*/*.mnir"))  # every TU embedded its IR


def test_the_linked_module_is_registered_at_start_up(tmp_path):
    """A preloaded hook gets each TU's records and the linked module's."""
    app = build_rdc_sample("cxx", tmp_path)
    hook = build_print_hook(tmp_path)
    # Without a GPU the program fails after start-up; the hook has run by then.
    hooked = run([str(app)], env=tool_env(LD_PRELOAD=str(hook)), check=False)
    metas = [json.loads(line.split("metadata ", 1)[1])
             for line in hooked.stderr.splitlines() if line.startswith("hook: ")]
    assert sorted(Path(m["source"]).name for m in metas) == \
        ["integrate.cu", "main.cu", "physics.cu", "rdc_sample"]
    (linked,) = [m for m in metas if m.get("linked")]
    assert {k["name"] for k in linked["kernels"]} == KERNELS


def test_a_one_command_build_splits_into_compiles_and_a_link(tmp_path):
    from mneme_cc.drivers import invocation, rdc_compile

    args = ["-fgpu-rdc", "-O2", "-I", "inc", "a.cu", "-o", "app", "b.o", "-lm"]
    inv = invocation.analyse(args)
    assert rdc_compile.splittable(inv.args, inv.inputs, inv.cuda_inputs, inv.links)
    compiles, link = rdc_compile.split(args, inv.inputs, invocation.TAKES_VALUE, tmp_path)
    obj = str(tmp_path / "0-a.o")
    assert compiles == [["-fgpu-rdc", "-O2", "-I", "inc", "-lm", "-Qunused-arguments",
                         "-c", "a.cu", "-o", obj]]
    assert link == ["-fgpu-rdc", "-O2", "-I", "inc", obj, "-o", "app", "b.o", "-lm",
                    "-Qunused-arguments"]
    for other in (["-O2", "a.cu", "-o", "app"], ["-fgpu-rdc", "-c", "a.cu"]):
        inv = invocation.analyse(other)
        assert not rdc_compile.splittable(inv.args, inv.inputs, inv.cuda_inputs, inv.links)
    # -x goes to the compiles of the sources it applies to, never to the link.
    args = ["-fgpu-rdc", "-x", "cuda", "a.cpp", "-xnone", "b.o", "-o", "app"]
    inv = invocation.analyse(args)
    assert rdc_compile.splittable(inv.args, inv.inputs, inv.cuda_inputs, inv.links)
    compiles, link = rdc_compile.split(args, inv.inputs, invocation.TAKES_VALUE, tmp_path)
    obj = str(tmp_path / "0-a.o")
    assert compiles == [["-fgpu-rdc", "-Qunused-arguments", "-c", "-x", "cuda", "a.cpp", "-o", obj]]
    assert link == ["-fgpu-rdc", obj, "b.o", "-o", "app", "-Qunused-arguments"]


def test_one_command_with_a_response_file_and_x_cuda(tmp_path):
    sources = []
    for name in ("main", "integrate", "physics"):
        sources.append(tmp_path / f"{name}.cpp")
        shutil.copy(SAMPLE / f"{name}.cu", sources[-1])
    response = tmp_path / "args.rsp"
    response.write_text(f"-fgpu-rdc -O2 -I{SAMPLE} -x cuda {' '.join(map(str, sources))}\n")
    app = tmp_path / "app"
    run(["mneme-cxx", f"@{response}", "-o", str(app)], env=tool_env(TMPDIR=str(tmp_path)))
    check_device_link(app)
    (linked,) = [m for m in inspect(app) if m.get("linked")]
    assert {k["name"] for k in linked["kernels"]} == KERNELS
    assert not list(tmp_path.glob("mneme-rdc-*")) and not list(tmp_path.glob("mneme-link-*"))


def test_a_shared_library_of_rdc_objects_carries_its_linked_module(tmp_path):
    objects = compile_rdc(tmp_path, "-fPIC")
    lib = tmp_path / "libparticles.so"
    run(["mneme-cxx", "-fgpu-rdc", "-shared", str(objects["integrate"]), str(objects["physics"]),
         "-o", str(lib)])
    (linked,) = [m for m in inspect(lib) if m.get("linked")]
    assert {k["name"] for k in linked["kernels"]} == {"_Z9integratePfS_if"}
    assert "libcudart.so" in run(["readelf", "-d", str(lib)]).stdout
    check_device_link(lib)


def test_cmake_separable_compilation(tmp_path):
    # tests/samples/rdc/CMakeLists.txt: CUDA_SEPARABLE_COMPILATION ON, CUDA_ARCHITECTURES 90.
    check_program(build_rdc_sample("cmake", tmp_path), tmp_path)


def test_add_mneme_needs_no_setting_for_separable_compilation(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.24)
project(with_add_mneme LANGUAGES CXX CUDA)
find_package(mneme CONFIG REQUIRED)
add_subdirectory({RDC} rdc)
add_mneme(rdc_sample)
""")
    build = tmp_path / "build"
    mneme_dir = run(["mneme", "config", "cmakedir"]).stdout.strip()
    run(["cmake", "-S", str(source), "-B", str(build), f"-Dmneme_DIR={mneme_dir}",
         f"-DCMAKE_CUDA_COMPILER={nvcc_wrapper(tmp_path)}"])
    run(["cmake", "--build", str(build), "-j2"])
    check_program(build / "rdc" / "rdc_sample", tmp_path)


def test_damaged_ir_in_an_rdc_object_is_a_one_line_error(tmp_path):
    objects = compile_rdc(tmp_path)
    data = bytearray(objects["physics"].read_bytes())
    at = data.find(b"MNEMEIR\0")
    data[at + 40:at + 48] = b"XXXXXXXX"  # inside the metadata: the checksum fails
    objects["physics"].write_bytes(bytes(data))
    proc = run(["mneme-cxx", *map(str, objects.values()), "-o", str(tmp_path / "app")],
               check=False, env=tool_env())
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("mneme-cxx: error: ")
    assert "Traceback" not in proc.stderr


def test_a_static_library_named_twice(tmp_path):
    """`-lphysics -lphysics`, as link lines resolving host cycles have it."""
    objects = compile_rdc(tmp_path)
    run(["ar", "rcs", str(tmp_path / "libphysics.a"), str(objects["physics"])])
    app = tmp_path / "app"
    linked = run(["mneme-cxx", str(objects["main"]), str(objects["integrate"]), f"-L{tmp_path}",
                  "-lphysics", "-lphysics", str(tmp_path / "libphysics.a"), "-o", str(app)])
    assert "warning" not in linked.stderr
    check_program(app, tmp_path)
    # The same in a response file, as CMake writes long link lines.
    response = tmp_path / "link.rsp"
    response.write_text(f"{objects['main']} {objects['integrate']} -L{tmp_path} "
                        "-lphysics -lphysics\n")
    run(["mneme-cxx", f"@{response}", "-o", str(tmp_path / "rsp_app")])
    check_device_link(tmp_path / "rsp_app")
    nvcc_app = tmp_path / "nvcc_app"
    run([str(nvcc_wrapper(tmp_path)), "-arch=sm_90", str(objects["main"]), str(objects["integrate"]),
         f"-L{tmp_path}", "-lphysics", "-lphysics", "-o", str(nvcc_app)], cwd=tmp_path)
    (tmp_path / "nvcc").mkdir()
    check_program(nvcc_app, tmp_path / "nvcc")


def test_repeated_archives_become_one_group(tmp_path):
    from mneme_cc.drivers.rdc_link import without_repeated_archives

    (tmp_path / "libx.a").write_bytes(b"!<arch>\n")
    lib = str(tmp_path / "libx.a")
    args = ["a.o", "-L", str(tmp_path), "-lx", "b.o", "-l", "x", lib, "-lm", "-o", "app"]
    assert without_repeated_archives(args) == \
        ["a.o", "-L", str(tmp_path), "-Wl,--start-group", "-lx", "b.o", "-Wl,--end-group",
         "-lm", "-o", "app"]
    grouped = ["-Wl,--start-group", "a.o", f"-L{tmp_path}", "-lx", "-lx", "-Wl,--end-group"]
    assert without_repeated_archives(grouped) == grouped[:4] + grouped[5:]


def test_a_member_in_two_archives_is_linked_once(tmp_path):
    """The IR link pulls it once, as a linker would; the device link itself
    refuses the program (nvlink: multiple definition), with nvcc as well."""
    from mneme_cc.drivers import rdc_link

    objects = compile_rdc(tmp_path)
    for lib in ("libphysics.a", "libphysics2.a"):
        run(["ar", "rcs", str(tmp_path / lib), str(objects["physics"])])
    paths = [str(objects["main"]), str(objects["integrate"]), str(tmp_path / "libphysics.a"),
             str(tmp_path / "libphysics2.a")]
    modules = rdc_link.select(rdc_link.rdc_units(paths), "sm_90")
    assert [Path(m.source).name for m in modules] == ["main.cu", "integrate.cu", "physics.cu"]
    assert "libphysics.a(" in modules[-1].origin


def test_an_ir_link_that_fails_leaves_the_program_without_a_linked_module(tmp_path, capfd):
    from mneme_cc.drivers import rdc_link, toolchain

    objects = []
    for name, scale in (("a", "0.5f"), ("b", "0.25f")):
        source = tmp_path / f"{name}.cu"
        source.write_text(f"__device__ float drag(float v) {{ return v * {scale}; }}\n"
                          f"__global__ void k_{name}(float *x) {{ x[0] = drag(x[0]); }}\n")
        objects.append(str(tmp_path / f"{name}.o"))
        run(["mneme-cxx", "-fgpu-rdc", "-c", str(source), "-o", objects[-1]])
    capfd.readouterr()
    units = rdc_link.rdc_units(objects)
    assert rdc_link.linked_ir_object(units, "app", toolchain.select_clang(), tmp_path) is None
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mneme: warning: linking the device IR of ")
    assert "app gets no linked device module" in err


LIBRARY_KERNEL = """
extern __device__ float scale;
__device__ float twice(float x);
__global__ void k(float *x) { x[threadIdx.x] = twice(x[threadIdx.x]) * scale; }
void launch_k(float *x, int n) { k<<<1, n>>>(x); }
"""
LIBRARY_DEVICE = """
__device__ float scale = 3.0f;
__device__ float twice(float x) { return 2.0f * x; }
"""
CXX_MAIN = """
#include <cuda_runtime.h>
void launch_k(float *x, int n);
int main() {
  float *x;
  if (cudaMalloc(&x, 4 * sizeof(float)) != cudaSuccess) return 1;
  launch_k(x, 4);
  return cudaDeviceSynchronize() != cudaSuccess;
}
"""


@pytest.mark.parametrize("how", ["add_mneme", "CXX=mneme-cxx"])
def test_cmake_cuda_library_linked_into_a_cxx_program(how, tmp_path):
    """A separable-compilation CUDA library whose kernel only host code of a
    C++ program launches: CMake links such a program with the C++ compiler."""
    source = tmp_path / "src"
    source.mkdir()
    for name, text in (("k.cu", LIBRARY_KERNEL), ("dev.cu", LIBRARY_DEVICE),
                       ("main.cpp", CXX_MAIN)):
        (source / name).write_text(text)
    (source / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.24)
project(layout LANGUAGES CXX CUDA)
find_package(CUDAToolkit REQUIRED)
add_library(k STATIC k.cu dev.cu)
set_target_properties(k PROPERTIES CUDA_SEPARABLE_COMPILATION ON CUDA_ARCHITECTURES 90)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE k CUDA::cudart)
{"find_package(mneme CONFIG REQUIRED)" if how == "add_mneme" else ""}
{"add_mneme(app)" if how == "add_mneme" else ""}
""")
    build = tmp_path / "build"
    settings = ([f"-Dmneme_DIR={run(['mneme', 'config', 'cmakedir']).stdout.strip()}"]
                if how == "add_mneme" else
                ["-DCMAKE_CXX_COMPILER=mneme-cxx", "-DCMAKE_CUDA_RESOLVE_DEVICE_SYMBOLS=OFF"])
    run(["cmake", "-S", str(source), "-B", str(build), *settings,
         f"-DCMAKE_CUDA_COMPILER={nvcc_wrapper(tmp_path)}"])
    run(["cmake", "--build", str(build)])
    app = build / "app"
    check_device_link(app)
    assert "libcudart.so" in run(["readelf", "-d", str(app)]).stdout
    (linked,) = [m for m in inspect(app) if m.get("linked")]
    assert {k["name"] for k in linked["kernels"]} == {"_Z1kPf"}
