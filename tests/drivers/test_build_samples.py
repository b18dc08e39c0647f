"""Recordable builds of real CUDA programs: every kernel listed, every IR usable.

The multi sample has templates, __device__ and __constant__ globals, two
TUs named kernels.cu, a static and a shared library; it is built by a plain
Makefile (separate compile and link, make -j) at -O0 and -O3, and by CMake.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm
import pytest
from conftest import (
    MAIN_KERNELS,
    SAMPLES,
    SCALE_GLOBALS,
    SCALE_KERNELS,
    STENCIL_GLOBALS,
    STENCIL_KERNELS,
    build_print_hook,
    inspect_json,
    run,
    tool_env,
)

llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()

# What each build output must carry, by the source file of each module.
EXPECTED = {
    "multi_app": {"app/main.cu": MAIN_KERNELS, "scale/kernels.cu": SCALE_KERNELS},
    "libscale.a": {"scale/kernels.cu": SCALE_KERNELS},
    "libstencil.so": {"stencil/kernels.cu": STENCIL_KERNELS},
}


def by_source(report: dict) -> dict[str, dict]:
    """Modules keyed by the source path's last two components (CMake uses absolute paths)."""
    return {"/".join(m["source"].split("/")[-2:]): m for m in report["modules"]}


def check_modules(report: dict, expected: dict[str, set[str]]) -> None:
    modules = by_source(report)
    assert set(modules) == set(expected)
    for source, kernels in expected.items():
        module = modules[source]
        assert module["arch"] == "sm_90"
        assert {k["name"] for k in module["kernels"]} == kernels
        globals_ = {(g["name"], g["size"], g["space"]) for g in module["globals"]}
        if source == "scale/kernels.cu":
            assert globals_ == SCALE_GLOBALS
        if source == "stencil/kernels.cu":
            assert globals_ == STENCIL_GLOBALS


def check_ir_compiles(bc_path, kernels: set[str], features: str) -> None:
    """The extracted IR parses with llvmlite, has no optnone, and yields PTX for sm_90."""
    module = llvm.parse_bitcode(bc_path.read_bytes())
    module.verify()
    text = str(module)
    assert "optnone" not in text
    for name in kernels:
        assert not module.get_function(name).is_declaration
    machine = llvm.Target.from_triple(module.triple).create_target_machine(
        cpu="sm_90", features=features, opt=3)
    ptx = machine.emit_assembly(module)
    assert ".target sm_90" in ptx
    for name in kernels:
        assert f".entry {name}(" in ptx


@pytest.mark.parametrize("opt", ["-O0", "-O3"])
@pytest.mark.parametrize("artifact", sorted(EXPECTED))
def test_makefile_build_carries_every_kernel(make_build, opt, artifact, tmp_path):
    path = make_build(opt) / artifact
    report = inspect_json(path)
    check_modules(report, EXPECTED[artifact])
    for module in report["modules"]:
        assert module["ir_bytes"] > 0
    # -O0 marks every function optnone; the capture must have taken it off.
    run(["mneme", "inspect", str(path), "--extract", str(tmp_path)])
    for meta_path in sorted(tmp_path.glob("*.json")):
        meta = json.loads(meta_path.read_text())
        kernels = {k["name"] for k in meta["kernels"]}
        check_ir_compiles(meta_path.with_suffix(".bc"), kernels, meta["target_features"])


def test_object_files_carry_their_own_tu(make_build):
    build = make_build("-O3")
    check_modules(inspect_json(build / "app" / "main.o"), {"app/main.cu": MAIN_KERNELS})
    check_modules(inspect_json(build / "scale" / "kernels.o"), {"scale/kernels.cu": SCALE_KERNELS})
    check_modules(inspect_json(build / "stencil" / "kernels.o"),
                  {"stencil/kernels.cu": STENCIL_KERNELS})


@pytest.mark.parametrize("artifact", sorted(EXPECTED))
def test_cmake_build_carries_every_kernel(cmake_build, artifact, tmp_path):
    report = inspect_json(cmake_build / artifact)
    check_modules(report, EXPECTED[artifact])
    run(["mneme", "inspect", str(cmake_build / artifact), "--extract", str(tmp_path)])
    for meta_path in sorted(tmp_path.glob("*.json")):
        meta = json.loads(meta_path.read_text())
        check_ir_compiles(meta_path.with_suffix(".bc"), {k["name"] for k in meta["kernels"]},
                          meta["target_features"])


def test_recordable_binaries_link_the_shared_cuda_runtime(make_build, cmake_build):
    for binary in (make_build("-O3") / "multi_app", cmake_build / "multi_app",
                   cmake_build / "libstencil.so"):
        needed = run(["readelf", "-d", str(binary)]).stdout
        assert "libcudart.so" in needed, binary
        assert "cudart_static" not in needed


def test_every_arch_asked_for_is_captured(tmp_path):
    obj = tmp_path / "k.o"
    run(["mneme-cxx", "--cuda-gpu-arch=sm_80", "--cuda-gpu-arch=sm_90", "-O2", "-c",
         str(SAMPLES / "multi" / "stencil" / "kernels.cu"), "-o", str(obj)])
    report = inspect_json(obj)
    assert sorted(m["arch"] for m in report["modules"]) == ["sm_80", "sm_90"]


def test_mneme_cuda_arch_sets_the_default(tmp_path):
    obj = tmp_path / "k.o"
    run(["mneme-cxx", "-c", str(SAMPLES / "variant.cu"), "-DVARIANT=1", "-o", str(obj)],
        env=tool_env(MNEME_CUDA_ARCH="sm_89"))
    assert [m["arch"] for m in inspect_json(obj)["modules"]] == ["sm_89"]


@pytest.mark.parametrize("cc1", ["integrated", "separate"])
def test_parallel_compiles_of_one_file_never_mix_their_ir(tmp_path, cc1):
    """Sixteen compiles of one file at once, each with its own kernel name."""
    flags = ["-fno-integrated-cc1"] if cc1 == "separate" else []

    def compile_variant(n: int) -> None:
        run(["mneme-cxx", *flags, "-O1", f"-DVARIANT={n}", "-c", str(SAMPLES / "variant.cu"),
             "-o", str(tmp_path / f"v{n}.o")])

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(compile_variant, range(16)))
    for n in range(16):
        name = f"variant_{n}"
        modules = inspect_json(tmp_path / f"v{n}.o")["modules"]
        assert [[k["name"] for k in m["kernels"]] for m in modules] == [[f"_Z{len(name)}{name}Pi"]]


def test_registration_hook_receives_every_module(make_build, tmp_path):
    """A preloaded library defining the hook gets each TU's records at start-up
    (the executable's two and the shared library's one); without it, nothing runs."""
    hook = build_print_hook(tmp_path)
    app = make_build("-O3") / "multi_app"
    # Without a GPU the application fails after start-up; the hook has run by then.
    hooked = run([str(app), "16"], env=tool_env(LD_PRELOAD=str(hook)), check=False)
    lines = [json.loads(line.split("metadata ", 1)[1])
             for line in hooked.stderr.splitlines() if line.startswith("hook: ")]
    assert sorted(meta["source"] for meta in lines) == [
        "app/main.cu", "scale/kernels.cu", "stencil/kernels.cu"]
    plain = run([str(app), "16"], check=False)
    assert "hook:" not in plain.stderr
    assert plain.returncode == hooked.returncode
