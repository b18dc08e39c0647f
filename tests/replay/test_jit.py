"""CPU tier: the replay JIT up to PTX, and ReplayConfig.

The IR comes from real mneme-cxx builds (at -O0 and -O3); every check reads
the PTX that LLVM's NVPTX backend (llvmlite) emits for sm_90.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import EXAMPLES, run

from mneme_cc.drivers.embedded import read_embedded_modules
from mneme_cc.errors import UsageError
from mneme_cc.replay.compiling.jit import KernelLaunch, compile_ptx
from mneme_cc.replay.compiling.llvm import llvm_binding, pipeline_of
from mneme_cc.replay.compiling.numerics import Codegen
from mneme_cc.replay.compiling.pipeline import Pipeline
from mneme_cc.replay.config import ReplayConfig

KERNEL = "_Z10vector_addPKfS0_Pfi"
N = 1000000
ARGS = (np.array([0x200000000000, 0x200000400000, 0x200000800000], np.uint64).tobytes()
        + np.array([N], np.int32).tobytes())
LAUNCH = KernelLaunch(KERNEL, (1024, 1, 1), (256, 1, 1), ARGS, ((0, 8), (8, 8), (16, 8), (24, 4)))
CODEGEN = Codegen()  # clang's defaults for CUDA at -O3


@pytest.fixture(scope="module", params=["-O0", "-O3"])
def bitcode(request, tmp_path_factory) -> bytes:
    obj = tmp_path_factory.mktemp("jit") / "vector_add.o"
    run(["mneme-cxx", request.param, "-c", str(EXAMPLES / "vector_add" / "vector_add.cu"),
         "-o", str(obj)])
    (module,) = read_embedded_modules(obj)
    return module.bitcode


def param_loads(ptx: str) -> set[int]:
    return {int(m) for m in re.findall(rf"\[{KERNEL}_param_(\d+)\]", ptx)}


def test_plain_compile_loads_every_parameter(bitcode):
    result = compile_ptx(bitcode, LAUNCH, ReplayConfig(), "sm_90", CODEGEN)
    assert f".entry {KERNEL}(" in result.ptx and ".target sm_90" in result.ptx
    assert param_loads(result.ptx) == {0, 1, 2, 3}
    assert ".maxntid" not in result.ptx
    assert set(result.seconds) == {"parse", "transform", "optimize", "contract", "codegen"}


def test_argument_specialization_folds_the_constant(bitcode):
    result = compile_ptx(bitcode, LAUNCH, ReplayConfig(specialize_args=(3,)), "sm_90", CODEGEN)
    assert param_loads(result.ptx) == {0, 1, 2}          # n is no longer loaded
    assert re.search(rf"\b{N}\b", result.ptx)            # it is an immediate
    pointers = compile_ptx(bitcode, LAUNCH, ReplayConfig(specialize_args=(0, 1, 2)), "sm_90", CODEGEN)
    assert param_loads(pointers.ptx) == {3}
    assert str(0x200000000000) in pointers.ptx or "35184372088832" in pointers.ptx


def test_dimension_specialization_replaces_special_registers(bitcode):
    plain = compile_ptx(bitcode, LAUNCH, ReplayConfig(), "sm_90", CODEGEN).ptx
    special = compile_ptx(bitcode, LAUNCH, ReplayConfig(specialize_dims=True), "sm_90", CODEGEN).ptx
    assert "%ntid.x" in plain and "%nctaid.x" in plain
    assert "%ntid.x" not in special and "%nctaid.x" not in special
    assert "262144" in special                           # gridDim * blockDim, folded
    assert "%tid.x" in special and "%ctaid.x" in special  # the thread's own index stays


def test_launch_bounds_reach_the_ptx(bitcode):
    config = ReplayConfig(launch_bounds=True, min_blocks_per_sm=2)
    ptx = compile_ptx(bitcode, LAUNCH, config, "sm_90", CODEGEN).ptx
    assert ".maxntid 256" in ptx and ".minnctapersm 2" in ptx
    ptx = compile_ptx(bitcode, LAUNCH, ReplayConfig(launch_bounds=True, max_threads=128),
                      "sm_90", CODEGEN).ptx
    assert ".maxntid 128" in ptx and ".minnctapersm" not in ptx


def test_pipelines_differ(bitcode):
    texts = {p: compile_ptx(bitcode, LAUNCH, ReplayConfig(pipeline=p), "sm_90", CODEGEN).ir
             for p in ("default<O0>", "default<O3>", "sroa,instcombine,simplifycfg")}
    assert len(set(texts.values())) == 3
    assert texts["default<O3>"].count("alloca") == 0


def test_unknown_pass_is_an_error_that_lists_the_known_ones():
    with pytest.raises(UsageError) as err:
        pipeline_of("instcombine,loop-magic")
    assert "loop-magic" in str(err.value) and "instcombine" in str(err.value)
    assert Pipeline.parse("default<O2>").level == 2
    assert Pipeline.parse(" sroa , gvn ").passes == ("sroa", "gvn")


def test_bad_specialization_requests(bitcode):
    with pytest.raises(UsageError, match="no parameter 9"):
        compile_ptx(bitcode, LAUNCH, ReplayConfig(specialize_args=(9,)), "sm_90", CODEGEN)
    with pytest.raises(UsageError, match="defines no kernel"):
        compile_ptx(bitcode, KernelLaunch("nope", (1, 1, 1), (1, 1, 1)), ReplayConfig(), "sm_90", CODEGEN)


def test_config_round_trips_and_grounds():
    config = ReplayConfig(grid=(8, 1, 1), block=256, pipeline="default<O2>",
                          specialize_args=(3, 1, 3), max_threads=64, verify={"c": {"ulp": 2}})
    again = ReplayConfig.from_json(config.to_json())
    assert again == config and again.block == (256, 1, 1) and again.specialize_args == (1, 3)
    # Launch-bound values without launch bounds change nothing: same key.
    assert config.key() == ReplayConfig.from_json({**json_dict(config), "max_threads": None}).key()
    assert config.key() != ReplayConfig.from_json({**json_dict(config), "launch_bounds": True}).key()
    # A baseline compiles nothing of the config's: compile fields do not matter.
    assert ReplayConfig(baseline="original", pipeline="default<O1>").key() == \
        ReplayConfig(baseline="original").key()
    # A pass list takes no tuning options; default<On> does.
    off = {"loop_unrolling": False}
    assert ReplayConfig(pipeline="sroa,gvn", tuning=off).key() == \
        ReplayConfig(pipeline="sroa,gvn").key()
    assert ReplayConfig(tuning=off).key() != ReplayConfig().key()


def json_dict(config: ReplayConfig) -> dict:
    import json

    return json.loads(config.to_json())


def test_a_config_s_json_form_is_every_field_plain_and_sorted():
    """to_dict builds the form field by field; it is what dataclasses.asdict
    gives, with keys sorted and tuples as lists, nested values included."""
    import dataclasses
    import json

    config = ReplayConfig(grid=(4, 2, 1), block=128, specialize_args=(3, 1), launch_bounds=True,
                          max_threads=128, tuning={"loop_unrolling": False},
                          verify={"out": {"rtol": 1e-3, "order": (2, 1)}}, baseline="ir")
    expected = json.loads(json.dumps(dataclasses.asdict(config), sort_keys=True))
    assert config.to_dict() == expected and list(config.to_dict()) == sorted(expected)
    assert config.to_dict()["verify"] == {"out": {"order": [2, 1], "rtol": 1e-3}}
    grounded = dataclasses.replace(config, baseline=None).grounded()
    assert grounded.grounded() is grounded  # already canonical: no copy


@pytest.mark.parametrize("fields, message", [
    ({"grid": [0, 1, 1]}, "grid must be"),
    ({"baseline": "best"}, "baseline must be one of"),
    ({"ptxas_opt_level": 5}, "ptxas_opt_level must be 0..3"),
    ({"max_registers": 4}, "max_registers must be 16..255"),
    ({"iterations": 0}, "iterations must be >= 1"),
    ({"pipline": "default<O3>"}, "unknown ReplayConfig field"),
    ({"tuning": {"unroll": True}}, "unknown tuning option 'unroll'"),
    ({"tuning": {"loop_unrolling": 1}}, "loop_unrolling takes a bool"),
])
def test_config_rejects_bad_fields(fields, message):
    with pytest.raises(UsageError, match=message):
        ReplayConfig.from_json(fields)


def test_tuning_options_reach_the_pipeline(tmp_path):
    """spmv's row loop: O3 unrolls it unless loop_unrolling is off."""
    obj = tmp_path / "cg.o"
    run(["mneme-cxx", "-O3", "-c", str(EXAMPLES / "cg" / "cg.cu"), f"-I{EXAMPLES / 'common'}",
         "-o", str(obj)])
    (module,) = read_embedded_modules(obj)
    (spmv,) = [k.name for k in module.kernels if "spmv" in k.name]
    launch = KernelLaunch(spmv, (10, 1, 1), (128, 1, 1), bytes(48),
                          ((0, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 8)))
    unrolled = compile_ptx(module.bitcode, launch, ReplayConfig(), "sm_90", CODEGEN).ptx
    rolled = compile_ptx(module.bitcode, launch,
                         ReplayConfig(tuning={"loop_unrolling": False}), "sm_90", CODEGEN).ptx
    assert rolled.count("ld.global") < unrolled.count("ld.global")


def test_floating_point_scalars_specialise(tmp_path):
    """axpy(n, alpha, x, y): a double argument becomes an immediate."""
    obj = tmp_path / "cg.o"
    run(["mneme-cxx", "-O3", f"-I{EXAMPLES / 'common'}", "-c", str(EXAMPLES / "cg" / "cg.cu"),
         "-o", str(obj)])
    (module,) = read_embedded_modules(obj)
    name = "_Z4axpyidPKdPd"
    args = (np.array([1000, 0], np.int32).tobytes() + np.array([0.375], np.float64).tobytes()
            + np.array([0x200000000000, 0x200000200000], np.uint64).tobytes())
    launch = KernelLaunch(name, (1024, 1, 1), (256, 1, 1), args, ((0, 4), (8, 8), (16, 8), (24, 8)))
    ptx = compile_ptx(module.bitcode, launch, ReplayConfig(specialize_args=(0, 1)), "sm_90", CODEGEN).ptx
    assert not re.search(rf"\[{name}_param_[01]\]", ptx)
    assert "0d3FD8000000000000" in ptx  # 0.375


def test_ptxas_options_and_resources(tmp_path):
    """nvJitLink runs here without a GPU: ptxas options show in the resources."""
    from mneme_cc.replay.compiling.cubin import compile_cubin

    obj = tmp_path / "cg.o"
    run(["mneme-cxx", "-O3", f"-I{EXAMPLES / 'common'}", "-c", str(EXAMPLES / "cg" / "cg.cu"),
         "-o", str(obj)])
    (module,) = read_embedded_modules(obj)
    launch = KernelLaunch("_Z4spmviPKiS0_PKdS2_Pd", (1024, 1, 1), (256, 1, 1))
    ptx = compile_ptx(module.bitcode, launch, ReplayConfig(), "sm_90", CODEGEN).ptx
    free = compile_cubin(ptx, launch.name, ReplayConfig(), "sm_90")
    capped = compile_cubin(ptx, launch.name, ReplayConfig(max_registers=16), "sm_90")
    assert free.data[:4] == b"\x7fELF" and free.resources.registers > 16
    assert capped.resources.registers <= 16 and capped.data != free.data
    assert free.resources.constant_bytes > 0


def test_compile_cache_hits_and_misses(bitcode, tmp_path):
    from mneme_cc.replay.compiling.compiler import compile_kernel

    def compile_(config):
        return compile_kernel(bitcode, "irhash", LAUNCH, config, "sm_90", CODEGEN, cache_dir=tmp_path)

    first = compile_(ReplayConfig(specialize_args=(3,)))
    assert not first.cache_hit and {"parse", "optimize", "codegen", "ptxas"} <= set(first.seconds)
    again = compile_(ReplayConfig(specialize_args=(3,), iterations=99, flush_l2=True))
    assert again.cache_hit and again.cubin == first.cubin and again.seconds == {}
    # What ran can be shown from a hit as from a miss: the IR, PTX and cubin.
    assert again.ir == first.ir and f"@{KERNEL}(" in first.ir
    assert again.ptx == first.ptx
    # A cache directory given as text (worker processes get one) is the same cache.
    assert compile_kernel(bitcode, "irhash", LAUNCH, ReplayConfig(specialize_args=(3,)), "sm_90", CODEGEN,
                          cache_dir=str(tmp_path)).cache_hit
    assert not compile_(ReplayConfig(specialize_args=(3,), max_registers=32)).cache_hit
    assert not compile_(ReplayConfig()).cache_hit
    # Launch-bound values without launch bounds are the same binary.
    assert compile_(ReplayConfig(max_threads=64)).cache_hit
    other_n = KernelLaunch(KERNEL, LAUNCH.grid, LAUNCH.block, ARGS[:24] + bytes(4), LAUNCH.params)
    assert not compile_kernel(bitcode, "irhash", other_n, ReplayConfig(specialize_args=(3,)),
                              "sm_90", CODEGEN, cache_dir=tmp_path).cache_hit
    assert not [p for p in tmp_path.rglob("*") if ".tmp." in p.name]
    # Differing in ptxas's options alone: LLVM does not run again.
    capped = compile_(ReplayConfig(specialize_args=(3,), max_registers=24))
    assert "ptxas" in capped.seconds and "optimize" not in capped.seconds
    assert capped.ptx == first.ptx and capped.ir == first.ir and capped.cubin != first.cubin
    # Other LLVM settings that give the same PTX: ptxas does not run again.
    unrolled = compile_(ReplayConfig(specialize_args=(3,), tuning={"loop_unrolling": False}))
    assert "optimize" in unrolled.seconds and "ptxas" not in unrolled.seconds
    assert unrolled.cubin == first.cubin and not unrolled.cache_hit
    # A damaged entry is compiled again, not used.
    (cubin,) = [p for p in tmp_path.rglob("kernel.cubin")
                if p.read_bytes() == first.cubin]
    cubin.write_bytes(first.cubin[:100])
    repaired = compile_(ReplayConfig(specialize_args=(3,)))
    assert not repaired.cache_hit and repaired.cubin == first.cubin
    assert compile_(ReplayConfig(specialize_args=(3,))).cache_hit


@pytest.mark.parametrize("log", [
    # ptxas's own lines (nvJitLink 13.5)
    "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
    "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
    "ptxas info    : Used 40 registers, used 0 barriers, 16 bytes cumulative stack size\n"
    "info    : used 40 registers, used 0 barriers, 16 stack, 1024 bytes smem, "
    "536 bytes cmem[0], 16 bytes lmem\n",
    # nvJitLink's summary alone (seen with nvJitLink 13.0)
    "info    : 0 bytes gmem\ninfo    : Function properties for 'k':\n"
    "info    : used 40 registers, used 0 barriers, 16 stack, 1024 bytes smem, "
    "536 bytes cmem[0], 16 bytes lmem\n",
])
def test_resource_reports_of_both_formats(log):
    from mneme_cc.replay.compiling.cubin import parse_resources

    r = parse_resources(log, "k")
    assert (r.registers, r.local_bytes, r.shared_bytes, r.constant_bytes) == (40, 16, 1024, 536)


def test_the_device_compare_kernels_compile():
    """Verification's compare kernels go through the same llvmlite + nvJitLink path."""
    from mneme_cc.replay.compiling.cubin import compile_cubin
    from mneme_cc.replay.compiling.llvm import llvm_binding
    from mneme_cc.replay.judging.gpu_compare import BYTES, COMPARE_IR, VECTORS

    llvm = llvm_binding()
    module = llvm.parse_assembly(COMPARE_IR)
    module.verify()
    ptx = llvm.Target.from_triple(module.triple).create_target_machine(
        cpu="sm_90", opt=3).emit_assembly(module)
    assert f".entry {BYTES}(" in ptx and f".entry {VECTORS}(" in ptx
    assert "atom.global.add.u64" in ptx and "ld.global.v4.b32" in ptx  # 16-byte loads
    assert "shfl.sync.bfly" in ptx  # a warp's counts summed before its atomics
    assert compile_cubin(ptx, BYTES, ReplayConfig(), "sm_90").data[:4] == b"\x7fELF"


def test_mutations_miscompile_where_a_pass_list_names_them(bitcode):
    """The deliberately wrong transformations triage uses to prove bisection."""
    plain = compile_ptx(bitcode, LAUNCH, ReplayConfig(pipeline="sroa"), "sm_90", CODEGEN)
    flipped = compile_ptx(bitcode, LAUNCH, ReplayConfig(pipeline="sroa,mneme-flip-icmp"),
                          "sm_90", CODEGEN)
    assert re.findall(r"= icmp (\w+) ", plain.ir)[0] == "slt"    # i < n
    assert re.findall(r"= icmp (\w+) ", flipped.ir)[0] == "sge"
    # Passes after it run on the mutated module.
    later = compile_ptx(bitcode, LAUNCH, ReplayConfig(
        pipeline="sroa,mneme-flip-icmp,instcombine,simplifycfg"), "sm_90", CODEGEN)
    assert later.ptx != compile_ptx(bitcode, LAUNCH, ReplayConfig(
        pipeline="sroa,instcombine,simplifycfg"), "sm_90", CODEGEN).ptx
    dropped = compile_ptx(bitcode, LAUNCH, ReplayConfig(pipeline="sroa,mneme-drop-store"),
                          "sm_90", CODEGEN)
    stores = compile_ptx(bitcode, LAUNCH, ReplayConfig(pipeline="sroa"), "sm_90", CODEGEN)
    assert dropped.ptx.count("st.global") < stores.ptx.count("st.global")
    # "none" runs no pass at all.
    assert Pipeline.parse("none").passes == ()


def test_opt_bisect_limit_runs_a_prefix_of_the_pipeline(bitcode):
    o3 = compile_ptx(bitcode, LAUNCH, ReplayConfig(pipeline="default<O3>"), "sm_90", CODEGEN)
    none = compile_ptx(bitcode, LAUNCH, ReplayConfig(opt_bisect_limit=0), "sm_90", CODEGEN)
    assert none.ir != o3.ir and o3.bisect_log == ""
    # A limit past every pass is the whole pipeline again (the same code; the
    # text of the IR differs in the order of `preds` comments only).
    assert compile_ptx(bitcode, LAUNCH, ReplayConfig(opt_bisect_limit=100000), "sm_90", CODEGEN).ptx \
        == o3.ptx
    # Numbering starts at 1 every time, and this process was left alone.
    lines = compile_ptx(bitcode, LAUNCH, ReplayConfig(opt_bisect_limit=3), "sm_90", CODEGEN) \
        .bisect_log.splitlines()
    assert lines[0].startswith("BISECT: running pass (1) ")
    assert lines[3].startswith("BISECT: NOT running pass (4) ")
    assert compile_ptx(bitcode, LAUNCH, ReplayConfig(), "sm_90", CODEGEN).ir == o3.ir


def test_fp_reassociation_flags_every_float_operation(bitcode):
    plain = compile_ptx(bitcode, LAUNCH, ReplayConfig(pipeline="none"), "sm_90", CODEGEN)
    loose = compile_ptx(bitcode, LAUNCH, ReplayConfig(pipeline="none", fp_reassociate=True),
                        "sm_90", CODEGEN)
    adds = re.findall(r"= fadd ([^%]*)", plain.ir)
    assert adds and all("reassoc" not in a for a in adds)
    assert re.findall(r"= fadd ([^%]*)", loose.ir) == [f"reassoc nsz {a}" for a in adds]


@pytest.mark.parametrize("flags", [["-O0", "-g"], ["-O3", "-gline-tables-only"]])
def test_debug_builds_compile_at_every_ptxas_level(tmp_path, flags):
    """ptxas refuses optimised debugging: replay strips the debug information
    unless asked to keep it, and then runs ptxas at -O0 with -lineinfo."""
    from mneme_cc.replay.compiling.compiler import compile_kernel

    obj = tmp_path / "vector_add.o"
    run(["mneme-cxx", *flags, "-c", str(EXAMPLES / "vector_add" / "vector_add.cu"), "-o",
         str(obj)])
    (module,) = read_embedded_modules(obj)
    codegen = Codegen.from_module(module.metadata, module.bitcode)
    assert "!dbg" in str(llvm_binding().parse_bitcode(module.bitcode))
    stripped = compile_kernel(module.bitcode, "irhash", LAUNCH, ReplayConfig(ptxas_opt_level=3),
                              "sm_90", codegen, cache_dir=tmp_path)
    assert stripped.cubin[:4] == b"\x7fELF" and ".loc" not in stripped.ptx
    # Nothing of the debug information is left for LLVM to complain about.
    from mneme_cc.replay.compiling import irtext

    text = irtext.strip_debug_info(str(llvm_binding().parse_bitcode(module.bitcode)))
    assert "!dbg" not in text and "llvm.dbg.cu" not in text
    locations = set(re.findall(r"^(!\d+) = !DILocation", text, re.M))
    assert not any(loc in line for line in text.splitlines() if line.startswith("!")
                   and " = distinct !{" in line for loc in locations)
    kept = compile_kernel(module.bitcode, "irhash", LAUNCH, ReplayConfig(keep_debug_info=True),
                          "sm_90", codegen, cache_dir=tmp_path)
    assert kept.cubin[:4] == b"\x7fELF" and ".loc" in kept.ptx


def test_edits_keep_the_order_of_uses_llvm_can_read_back(tmp_path):
    """Replay prints each value's use order (clang's module had it) and edits
    the text: specialised dimensions and contraction off drop the directives
    their edits invalidate, and the printer's inline-asm ones, which LLVM's
    parser refuses, never reach it (microphysics has inline asm)."""
    obj = tmp_path / "microphysics.o"
    run(["mneme-cxx", "-O3", f"-I{EXAMPLES / 'common'}", "-c",
         str(EXAMPLES / "microphysics" / "microphysics.cu"), "-o", str(obj)])
    (module,) = read_embedded_modules(obj)
    codegen = Codegen.from_module(module.metadata, module.bitcode)
    launch = KernelLaunch(module.kernels[0].name, (1024, 1, 1), (128, 1, 1))
    for config in (ReplayConfig(specialize_dims=True), ReplayConfig(fp_contract="off"),
                   ReplayConfig(pipeline="default<O1>", specialize_dims=True),
                   ReplayConfig(pipeline="sroa,instcombine,mneme-drop-store,instcombine")):
        assert ".entry" in compile_ptx(module.bitcode, launch, config, module.arch, codegen).ptx


def test_a_folded_product_leaves_its_debug_records_poison():
    from mneme_cc.replay.compiling.contraction import fold_fma

    ir = ("define float @k(float %a, float %b, float %c) {\n"
          "  %p = fmul contract float %a, %b\n"
          "    #dbg_value(float %p, !7, !DIExpression(), !9)\n"
          "  %s = fadd contract float %p, %c\n"
          "  ret float %s\n}\n")
    folded = fold_fma(ir)
    assert "%p =" not in folded and "#dbg_value(float poison, !7" in folded
    assert "call contract float @llvm.fma.f32(float %a, float %b, float %c)" in folded
