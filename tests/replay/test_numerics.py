"""The application's numerics: what the plugin records, what replay makes of it.

The flag matrix (conftest.FLAG_MATRIX) is built with mneme-cxx; for every
cell the recorded `codegen` must say what the flags asked for, and the PTX
replay compiles at the recorded settings (`mneme inspect --ptx`) must be
clang's own PTX for the same source and flags.
"""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, FLAG_MATRIX, MATRIX_EXAMPLES, build_matrix_cell, run

from mneme_cc.replay.compiling.contraction import (
    contractable_in_ptx,
    fold_fma,
    fuse_like_backend,
    mark_contract,
    pin_ptx,
    strip_contract,
)
from mneme_cc.replay.compiling.numerics import Codegen, infer_contract, numerics_changes
from mneme_cc.replay.config import ReplayConfig

#: What each cell's flags must make the plugin record.
EXPECTED = {
    "default": {"opt_level": "3", "fp_contract": "fast", "denormals_f32": "ieee",
                "prec_div": True, "fast_math": False, "approx_func": False, "ftz": False},
    "contract-on": {"fp_contract": "on"},
    "contract-off": {"fp_contract": "off"},
    "fast-math": {"fp_contract": "fast", "fast_math": True, "approx_func": True, "no_infs": True,
                  "no_nans": True, "no_signed_zeros": True, "reassociate": True,
                  "prec_div": False, "approx_transcendentals": True},
    "ftz": {"denormals_f32": "preserve-sign", "ftz": True, "denormals_f64": "ieee"},
    "O0": {"opt_level": "0", "loop_unrolling": False, "loop_vectorization": False},
    "O2": {"opt_level": "2", "loop_unrolling": True, "slp_vectorization": True},
}


def instructions(ptx: str) -> list[str]:
    """The PTX's instructions (opcodes with their operands), comments and directives dropped."""
    out = []
    for line in ptx.splitlines():
        line = line.split("//")[0].strip()
        if line and not line.startswith((".", "{", "}", "$")) and not line.endswith(":"):
            out.append(line)
    return out


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """{(example, cell): (mneme inspect --json module, replay's PTX, clang's PTX)}."""
    out = tmp_path_factory.mktemp("matrix")
    cells = {}
    for example in MATRIX_EXAMPLES:
        for cell, flags in FLAG_MATRIX.items():
            obj = build_matrix_cell(example, cell, out, compile_only=True)
            ptx_dir = out / f"{example}.{cell}.ptx"
            listing = json.loads(run(["mneme", "inspect", "--json", "--ptx", str(ptx_dir),
                                      str(obj)]).stdout)
            (module,) = listing["modules"]
            (replay_ptx,) = ptx_dir.glob("*.ptx")
            clang_ptx = out / f"{example}.{cell}.clang.ptx"
            run(["clang++-22", "-O3", *flags, "--cuda-device-only", "--cuda-gpu-arch=sm_90",
                 "--cuda-path=/usr/local/cuda", "-Wno-unknown-cuda-version",
                 f"-I{EXAMPLES / 'common'}", "-idirafter",
                 str(EXAMPLES.parent / "mneme_cc" / "compat" / "include"), "-S",
                 str(EXAMPLES / example / f"{example}.cu"), "-o", str(clang_ptx)])
            cells[example, cell] = (module, replay_ptx.read_text(), clang_ptx.read_text())
    return cells


@pytest.mark.parametrize("cell", list(FLAG_MATRIX))
@pytest.mark.parametrize("example", MATRIX_EXAMPLES)
def test_the_plugin_records_the_builds_floating_point_options(matrix, example, cell):
    codegen = matrix[example, cell][0]["codegen"]
    assert codegen["source"] == "cc1"
    expected = {**EXPECTED["default"], **EXPECTED[cell]}
    assert {k: codegen[k] for k in expected} == expected


@pytest.mark.parametrize("cell", list(FLAG_MATRIX))
@pytest.mark.parametrize("example", MATRIX_EXAMPLES)
def test_replay_ptx_at_the_recorded_settings_is_clangs(matrix, example, cell):
    _, replay, clang = matrix[example, cell]
    ours, theirs = instructions(replay), instructions(clang)
    assert replay.count("fma.rn") == clang.count("fma.rn")
    assert abs(len(ours) - len(theirs)) <= 0.02 * len(theirs)
    # Measured: every cell compiles to clang's instructions exactly.
    assert ours == theirs


def test_an_old_record_gets_its_numerics_from_its_ir():
    """A format-1 record has no codegen: the level comes from the -O0
    attributes, the contraction mode from the instructions."""
    fast = "define void @k() {\n  %1 = fmul contract float %a, %b\n  ret void\n}\n"
    on = "define void @k() {\n  %1 = call float @llvm.fmuladd.f32(float %a, float %b, float %c)\n}\n"
    off = "define void @k() {\n  %1 = fmul float %a, %b\n}\ndefine void @__nv_sinf() {\n}\n"
    libdevice_only = "define float @__nv_x() {\n  %1 = fmul contract float %a, %b\n}\n"
    assert [infer_contract(t) for t in (fast, on, off)] == ["fast", "on", "off"]
    assert infer_contract(libdevice_only + off) == "off"
    codegen = Codegen.from_metadata({"o0_attributes_removed": True}, on)
    assert (codegen.opt_level, codegen.fp_contract, codegen.source) == ("0", "on", "inferred")
    assert Codegen.from_metadata({}, fast).baseline_config() == ReplayConfig(
        pipeline="default<O3>", tuning=dict.fromkeys(
            ("loop_unrolling", "loop_interleaving", "loop_vectorization", "slp_vectorization"),
            True))


def test_contraction_transforms():
    text = ("  %3 = fmul float %1, %2\n  %4 = fadd nnan float %3, %0\n"
            "  %5 = fsub contract double %a, %b\n  %6 = fmul fast float %1, %1\n")
    marked = mark_contract(text)
    assert marked.count("contract") == 3 and "fmul fast float" in marked
    assert "fadd nnan contract float" in marked
    stripped = strip_contract(marked + "  %7 = tail call float @llvm.fmuladd.f32(float %1, "
                              "float 2.0, float %3)\n")
    assert "contract" not in stripped and "fast" not in stripped
    assert "%mneme.mul.7 = fmul float %1, 2.0\n  %7 = fadd float %mneme.mul.7, %3" in stripped
    # Vectors too, with the call's flags and debug location kept.
    vector = strip_contract("  %8 = call nnan <2 x float> @llvm.fmuladd.v2f32(<2 x float> %a, "
                            "<2 x float> <float 1.0, float 2.0>, <2 x float> %c), !dbg !7\n")
    assert vector == ("  %mneme.mul.8 = fmul nnan <2 x float> %a, <float 1.0, float 2.0>, "
                      "!dbg !7\n  %8 = fadd nnan <2 x float> %mneme.mul.8, %c, !dbg !7\n")
    ptx = ("\tadd.f32 %r1;\n\tmul.ftz.f64 %r2;\n\tadd.rn.f32 %r3;\n\tadd.s32 %r4;\n"
           "\t@%p1 sub.f32 %r5;\n\tred.global.add.f32 [%rd1], %r6;\n\tmul.f16x2 %r7;\n")
    assert pin_ptx(ptx) == ("\tadd.rn.f32 %r1;\n\tmul.rn.ftz.f64 %r2;\n\tadd.rn.f32 %r3;\n"
                            "\tadd.s32 %r4;\n\t@%p1 sub.rn.f32 %r5;\n"
                            "\tred.global.add.f32 [%rd1], %r6;\n\tmul.rn.f16x2 %r7;\n")
    assert contractable_in_ptx(ptx) == 4


def test_fusion_at_codegen_O0_follows_the_back_end():
    body = ("define float @f(float %a, float %b, float %c) {\n"
            "  %1 = fmul float %a, %b\n"
            "  %2 = fmul float %c, %c\n"
            "  %3 = fadd float %2, %1\n"            # two products: the one used less fuses
            "  %4 = fsub float %1, %c\n"            # a*b - c
            "  %5 = fsub float -0.000000e+00, %1\n"  # a negation, left alone
            "  %6 = fadd float %2, %2\n"            # a doubling, left alone
            "  %7 = fadd float %3, %2\n"
            "  %8 = fmul float %a, %c\n"
            "  %9 = fadd float %2, %8\n"
            "  br label %next\n"
            "next:\n"
            "  %10 = fadd float %1, %9\n"           # another block: not fused
            "  ret float %10\n}\n")
    fused = fuse_like_backend(body)
    assert "%3 = call float @llvm.fmuladd.f32(float %a, float %b, float %2)" in fused
    assert "%mneme.neg.4 = fneg float %c\n  %4 = call float @llvm.fmuladd.f32(float %a, " \
           "float %b, float %mneme.neg.4)" in fused
    assert "%5 = fsub float -0.000000e+00, %1" in fused and "%6 = fadd float %2, %2" in fused
    assert "%7 = call float @llvm.fmuladd.f32(float %c, float %c, float %3)" in fused
    assert "%9 = call float @llvm.fmuladd.f32(float %a, float %c, float %2)" in fused
    assert "%10 = fadd float %1, %9" in fused
    assert fused.rstrip().endswith("declare float @llvm.fmuladd.f32(float, float, float)")
    import llvmlite.binding as llvm

    llvm.parse_assembly(fused).verify()


def test_the_fma_peephole_folds_only_what_the_ir_allows():
    body = ("define float @f(float %a, float %b, float %c) {\n"
            "  %1 = fmul contract float %a, %b\n"
            "  %2 = fmul float %b, %c\n"
            "  br label %next\n"
            "next:\n"
            "  %3 = fadd contract float %2, %1\n"   # the first operand lacks contract
            "  %4 = fmul contract float %c, %c\n"
            "  %5 = fsub contract nnan float %4, %3\n"
            "  %6 = fmul contract float %a, %a\n"
            "  %7 = fadd float %6, %5\n"            # the add lacks contract
            "  %8 = fadd contract float %6, %7\n"   # %6 has two uses
            "  ret float %8\n}\n")
    folded = fold_fma(body)
    assert "%3 = call contract float @llvm.fma.f32(float %a, float %b, float %2)" in folded
    assert "%1 = fmul" not in folded  # folded into its one user, across blocks
    assert "%mneme.fneg.5 = fneg contract nnan float %3\n  %5 = call contract nnan float " \
           "@llvm.fma.f32(float %c, float %c, float %mneme.fneg.5)" in folded
    assert "%7 = fadd float %6, %5" in folded and "%8 = fadd contract float %6, %7" in folded
    import llvmlite.binding as llvm

    llvm.parse_assembly(folded).verify()


def test_the_fma_peephole_keeps_debug_locations():
    """Builds with -g or -lineinfo: debug records are no uses, locations stay."""
    body = ("define float @f(float %a, float %b, float %c) {\n"
            "  %1 = fmul contract float %a, %b, !dbg !5\n"
            "    #dbg_value(float %1, !9, !DIExpression(), !5)\n"
            "  %2 = fadd contract float %1, %c, !dbg !6\n"
            "  ret float %2\n}\n")
    folded = fold_fma(body)
    assert "%2 = call contract float @llvm.fma.f32(float %a, float %b, float %c), !dbg !6" \
        in folded and "%1 = fmul" not in folded


def test_numerics_changes_name_what_differs_from_the_build():
    fast, off, o0 = Codegen(), Codegen(fp_contract="off"), Codegen(opt_level="0")
    assert numerics_changes(fast.baseline_config(), fast) == []
    assert numerics_changes(o0.baseline_config(), o0) == []
    assert numerics_changes(ReplayConfig(baseline="ir", pipeline="default<O0>"), fast) == []
    assert numerics_changes(ReplayConfig(specialize_dims=True, launch_bounds=True), fast) == []
    reasons = numerics_changes(ReplayConfig(pipeline="default<O0>", ptxas_opt_level=0,
                                            fp_contract="on", fp_reassociate=True), fast)
    assert [r.split()[0] for r in reasons] == ["fp_contract", "reassociation", "the", "ptxas"]
    assert numerics_changes(ReplayConfig(ptxas_opt_level=1, pin_contraction=True), fast) == []
    assert numerics_changes(ReplayConfig(codegen_opt_level=0), fast)[0].startswith("code gen")
    # Nothing contracts in a -ffp-contract=off build, or with fp_contract off,
    # whatever the levels.
    assert numerics_changes(ReplayConfig(pipeline="default<O0>", ptxas_opt_level=0), off) == []
    assert [r.split()[0] for r in numerics_changes(ReplayConfig(
        fp_contract="off", ptxas_opt_level=0), fast)] == ["fp_contract"]
    # Pass lists and cut-short pipelines may fuse differently; they say so.
    assert numerics_changes(ReplayConfig(pipeline="sroa,gvn"), fast)[0].startswith(
        "the pass list sroa,gvn")
    assert "opt_bisect_limit 3" in numerics_changes(ReplayConfig(opt_bisect_limit=3), fast)[0]
    assert numerics_changes(ReplayConfig(pipeline="default<O3>"), o0)[0].startswith("the default")
    assert Codegen(fp_contract="fast-honor-pragmas").contract == "on"


@pytest.mark.parametrize("codegen, message", [
    ({"fp_contract": "sometimes"}, "unknown fp_contract 'sometimes'"),
    ({"fp_contract": "fast", "mllvm": 3}, "'mllvm' or 'reflect' has the wrong type"),
    ({"fp_contract": "fast", "reflect": [1]}, "'mllvm' or 'reflect' has the wrong type"),
    ({"fp_contract": "fast", "ftz": "yes"}, "'ftz' is not a bool"),
    ("fast", "'codegen' is not an object"),
])
def test_malformed_codegen_in_a_binary_is_one_line(tmp_path, codegen, message):
    from mneme_cc import _native
    from mneme_cc.drivers.embedded import read_embedded_modules

    obj = tmp_path / "k.o"
    run(["mneme-cxx", "-c", str(EXAMPLES / "vector_add" / "vector_add.cu"), "-o", str(obj)])
    (module,) = read_embedded_modules(obj)
    record = _native.encode_embedded_ir(json.dumps({**module.metadata, "codegen": codegen}),
                                        module.bitcode)
    data = obj.read_bytes()
    old = _native.encode_embedded_ir(json.dumps(module.metadata, separators=(",", ":"),
                                                sort_keys=True), module.bitcode)
    assert old in data and len(record) <= len(old)  # the section holds the record as encoded
    patched = tmp_path / "bad.o"
    patched.write_bytes(data.replace(old, record.ljust(len(old), b"\0")))
    proc = run(["mneme", "inspect", str(patched)], check=False)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_bitwise_study_runs_pass_lists_and_pins_ptxas():
    from mneme_cc.replay.compiling.numerics import for_bitwise_study

    fast = Codegen()
    config, why = for_bitwise_study(ReplayConfig(pipeline="sroa,gvn", ptxas_opt_level=1), fast)
    assert why is None and config.pin_contraction
    config, why = for_bitwise_study(ReplayConfig(pipeline="default<O0>"), fast)
    assert why.startswith("numerics-changing: the default<O0> pipeline")


def test_an_unknown_contraction_mode_is_refused():
    from mneme_cc.errors import UsageError

    with pytest.raises(UsageError, match="fp_contract must be fast, on or off"):
        ReplayConfig(fp_contract="sometimes")
    assert ReplayConfig(fp_contract="on").key() != ReplayConfig().key()
    # What clang's level sets anyway is not a setting: the same config.
    assert ReplayConfig(tuning={"slp_vectorization": True}).key() == ReplayConfig().key()
    assert ReplayConfig(tuning={"slp_vectorization": False}).key() != ReplayConfig().key()


def test_file_names_from_a_binary_cannot_leave_the_directory():
    """A module's source and arch come from the binary: they never become a path."""
    from mneme_cc import _native
    from mneme_cc.cli.inspect_command import _file_names
    from mneme_cc.drivers.embedded import decode_records

    meta = {"arch": "/../../PWNED", "source": "../../x.cu", "triple": "nvptx64-nvidia-cuda",
            "kernels": [], "globals": []}
    evil = decode_records(_native.encode_embedded_ir(json.dumps(meta), b"BC") * 2, "evil")
    names = _file_names(evil)
    assert names == ["x._.._.._PWNED", "x._.._.._PWNED.2"]
