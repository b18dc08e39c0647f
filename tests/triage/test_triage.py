"""CPU tier: element statistics of buffer differences (mneme diff)."""

from __future__ import annotations

import numpy as np
import pytest

from mneme_cc.errors import UsageError
from mneme_cc.replay.judging.compare import diff_buffer


def raw(values, dtype) -> np.ndarray:
    return np.asarray(values, dtype=dtype).view(np.uint8)


def test_identical_buffers_are_the_same_in_every_dtype():
    data = np.arange(64, dtype=np.uint8)
    for dtype in (None, "float16", "float32", "float64", "int8", "uint16", "int32", "uint64"):
        d = diff_buffer("x", 0, data, data.copy(), dtype)
        assert d.same and d.differing == 0 and d.first == []


def test_float32_nan_inf_signed_zero_and_ulps():
    nan_a = np.array([0x7FC00001], np.uint32).view(np.float32)[0]  # another NaN payload
    a = raw([1.0, 2.0, np.nan, np.inf, 0.0, 5.0, -np.inf, np.nan], np.float32)
    b = raw([1.0, np.nextafter(np.float32(2), np.float32(3)), 1.0, np.inf, -0.0, 5.5, np.inf,
             nan_a], np.float32)
    d = diff_buffer("x", 0x10, a, b, "float32", first=10)
    assert d.elements == 8 and d.differing == 6  # bits differ: 1, 2, 4, 5, 6, 7
    assert [f["index"] for f in d.first] == [1, 2, 4, 5, 6, 7]
    assert d.nan_mismatches == 1          # index 2 (both NaN at 7: no mismatch)
    assert d.inf_mismatches == 1          # index 6: -inf against +inf
    assert d.signed_zeros == 1            # index 4
    # Finite on both sides: indices 1, 4, 5. 5.0 -> 5.5 is 0.5 / 2^-21 ulps.
    assert d.max_abs == 0.5 and d.max_rel == pytest.approx(0.1)
    assert d.max_ulp == 2 ** 20
    assert d.first[3] == {"index": 5, "a": 5.0, "b": 5.5}
    assert d.bytes_differing == int(np.count_nonzero(a != b))


def test_float64_and_float16_ulps_and_relative_to_side_a():
    a64 = raw([1e300, -3.0, 0.0], np.float64)
    b64 = raw([-1e300, np.nextafter(-3.0, -4.0), 1e-300], np.float64)
    d = diff_buffer("x", 0, a64, b64, "float64")
    assert d.max_abs == pytest.approx(2e300)         # no overflow to inf
    assert d.max_rel == np.inf                        # 0 -> 1e-300: relative to a zero
    assert d.differing == 3 and d.nan_mismatches == d.inf_mismatches == 0
    d16 = diff_buffer("x", 0, raw([1.0, 2.0], np.float16),
                      raw([1.0009765625, 2.0], np.float16), "float16")
    assert (d16.differing, d16.max_ulp, d16.max_abs) == (1, 1, 0.0009765625)


def test_integers_are_exact_at_their_extremes():
    d = diff_buffer("x", 0, raw([-128, 127, 5], np.int8), raw([127, -128, 5], np.int8), "int8")
    assert (d.differing, d.max_abs, d.max_ulp) == (2, 255, None)
    top = 2 ** 64 - 1
    d = diff_buffer("x", 0, raw([0, top], np.uint64), raw([top, 0], np.uint64), "uint64")
    assert d.max_abs == top and d.max_rel == np.inf
    d = diff_buffer("x", 0, raw([-2 ** 63], np.int64), raw([2 ** 63 - 1], np.int64), "int64")
    assert d.max_abs == top and d.max_rel == pytest.approx(top / 2 ** 63)
    d = diff_buffer("x", 0, raw([10, 20], np.int32), raw([12, 20], np.int32), "int32")
    assert (d.max_abs, d.max_rel, d.first) == (2, 0.2, [{"index": 0, "a": 10, "b": 12}])


def test_bytes_trailing_bytes_and_histogram():
    a = np.arange(10, dtype=np.uint8)
    b = a.copy()
    b[[3, 9]] = 200
    d = diff_buffer("x", 0, a, b)
    assert (d.bytes_differing, d.dtype) == (2, None)
    assert d.first == [{"index": 3, "a": 3, "b": 200}, {"index": 9, "a": 9, "b": 200}]
    d = diff_buffer("x", 0, a, b, "float32")   # 2 whole floats and 2 trailing bytes
    assert (d.elements, d.trailing_bytes, d.differing, d.bytes_differing) == (2, 2, 1, 2)
    a = raw([1.0, 1.0, 1.0, 1.0], np.float64)
    b = raw([1.5, 1.05, 1.06, 1.0 + 2e-9], np.float64)
    d = diff_buffer("x", 0, a, b, "float64", histogram=True)
    assert [(h["from"], h["count"]) for h in d.histogram] == [(1e-9, 1), (0.01, 2), (0.1, 1)]


def test_bad_input_is_one_clear_error():
    with pytest.raises(UsageError, match="x: 4 bytes on one side, 8 on the other"):
        diff_buffer("x", 0, np.zeros(4, np.uint8), np.zeros(8, np.uint8))
    with pytest.raises(UsageError, match="no dtype 'float33'"):
        diff_buffer("x", 0, np.zeros(4, np.uint8), np.zeros(4, np.uint8), "float33")
    with pytest.raises(UsageError, match="neither a float nor an integer"):
        diff_buffer("x", 0, np.zeros(4, np.uint8), np.zeros(4, np.uint8), "complex64")


# --- mneme diff on a record database ----------------------------------------

import json  # noqa: E402

from conftest import run  # noqa: E402

from mneme_cc.replay.output import SavedRegion, save_output  # noqa: E402


def save(inst, path, change=None, drop=None):
    """The recorded epilogue as a saved output, with `change(name, array)` applied."""
    regions = []
    for r in inst.epilogue.regions:
        if r.kind != 0 or r.address == drop:
            continue
        data = r.read().copy()
        if change:
            change(r.address, data)
        regions.append(SavedRegion(r.kind, r.name, r.address, data))
    return save_output(path, inst, regions, {"config": None, "outcome": "test"})


def test_diff_of_a_saved_output_against_the_recording(instance, tmp_path):
    db, out = str(instance.db.path), 0x200000400000
    same = save(instance, tmp_path / "same")
    proc = run(["mneme", "diff", "-rdb", db, str(same)])
    report = json.loads(proc.stdout)
    assert report["same"] and report["a"] == "recorded epilogue" and len(report["buffers"]) == 3

    def perturb(address, data):
        if address == out:
            values = data.view(np.float32)
            values[[5, 7, 9]] = [np.nan, -0.0, values[9] * (1 + 2 ** -20)]

    changed = save(instance, tmp_path / "changed", perturb)
    proc = run(["mneme", "diff", "-rdb", db, str(changed), "--dtype", "arg:2=float32",
                "--histogram"], check=False)
    assert proc.returncode == 1
    (d,) = [b for b in json.loads(proc.stdout)["buffers"] if b["bytes_differing"]]
    assert (d["name"], d["dtype"], d["differing"]) == (f"allocation {out:#x}", "float32", 3)
    # 14.0 (7 + 7) against -0.0: a plain difference, not a signed zero; its ULP
    # distance is 14.0f's bit pattern, since -0 sits at 0 on the ULP line.
    assert (d["nan_mismatches"], d["signed_zeros"]) == (1, 0)
    assert d["max_ulp"] == int(np.float32(14.0).view(np.uint32)) == 0x41600000
    assert [f["index"] for f in d["first"]] == [5, 7, 9]
    assert d["max_abs"] == 14.0 and sum(h["count"] for h in d["histogram"]) == 2
    # Two saved outputs, no database needed; the same numbers either way round.
    proc = run(["mneme", "diff", str(changed), str(same), "--dtype", "float32"], check=False)
    assert proc.returncode == 1
    (back,) = [b for b in json.loads(proc.stdout)["buffers"] if b["bytes_differing"]]
    assert back["differing"] == 3 and back["nan_mismatches"] == 1


def test_diff_errors_are_one_line_with_exit_2(instance, tmp_path):
    db = str(instance.db.path)
    same = save(instance, tmp_path / "same")
    partial = save(instance, tmp_path / "partial", drop=0x200000400000)
    other = save(instance, tmp_path / "other")
    meta = json.loads((other / "output.json").read_text())
    (other / "output.json").write_text(json.dumps({**meta, "instance": "aa.bb"}))
    broken, listed, unknown = (tmp_path / n for n in ("broken.json", "list.json", "typo.json"))
    broken.write_text("{nope")
    listed.write_text("[1, 2]")
    unknown.write_text(json.dumps({"pipelin": "default<O2>"}))
    wrong_type = tmp_path / "type.json"
    wrong_type.write_text(json.dumps({"pipeline": 5}))
    damaged = save(instance, tmp_path / "damaged")
    (damaged / "output.json").write_text("[]")
    cases = [
        (["mneme", "diff", str(same), str(same), "--first", "-1"], "--first -1: give a count"),
        (["mneme", "diff", "-rdb", db, str(same), "--dtype", "arg:x=float32"],
         "arg:N takes a parameter index"),
        (["mneme", "replay", "-rdb", db, "--config", str(wrong_type)],
         "pipeline must be a string"),
        (["mneme", "diff", str(same), str(partial)], "the sides hold different buffers"),
        (["mneme", "diff", str(same), str(other)], "the sides are different instances"),
        (["mneme", "diff", str(same)], "mneme diff compares two sides; got 1"),
        (["mneme", "diff", str(tmp_path)], "not a saved replay output"),
        (["mneme", "diff", str(same), str(damaged)], "not what a saved replay output holds"),
        (["mneme", "diff", "-rdb", db, str(same), "--dtype", "float33"], "no dtype 'float33'"),
        (["mneme", "diff", "--config", "x.json"], "-rid and --config need -rdb DIR"),
        # --config files: one reader, one kind of message, for diff, bisect and replay.
        (["mneme", "diff", "-rdb", db, "--config", str(broken)], f"{broken}: not JSON"),
        (["mneme", "bisect", "-rdb", db, "--config", str(tmp_path / "absent.json")],
         "absent.json: no such file"),
        (["mneme", "replay", "-rdb", db, "--config", str(listed)],
         f"{listed}: not a ReplayConfig (a JSON object)"),
        (["mneme", "replay", "-rdb", db, "--config", str(unknown)],
         f"{unknown}: unknown ReplayConfig field(s): pipelin"),
    ]
    for cmd, message in cases:
        proc = run(cmd, check=False)
        assert proc.returncode == 2 and message in proc.stderr, (cmd, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.strip().count("\n") == 0


# --- bisection's search, with the GPU replaced by a rule ---------------------

from types import SimpleNamespace  # noqa: E402

from mneme_cc.replay.config import ReplayConfig  # noqa: E402
from mneme_cc.triage.bisect import Bisector  # noqa: E402


class RuleBisector(Bisector):
    """verifies() by a rule instead of a replay; _compile() returns the pipeline as IR."""

    def __init__(self, instance, config, rule):
        super().__init__(instance, config)
        self.rule = rule

    def verifies(self, config, what):
        ok = self.rule(config)
        self.steps.append({"config": what, "verified": ok})
        return ok

    def _compile(self, config):
        log = "\n".join(f"BISECT: running pass ({i}) pass{i} on (_Z3addPKfS0_Pfi)"
                        for i in range(1, 41))
        text = f"define void @_Z3addPKfS0_Pfi() {{\n  ; {config.pipeline} {config.opt_bisect_limit}\n}}\n"
        return SimpleNamespace(ir=text, bisect_log=log)

    def close(self):
        pass


def test_bisection_names_the_first_bad_pass_in_few_replays(instance):
    passes = ["sroa", "sccp", "instcombine", "mneme-flip-icmp", "simplifycfg", "gvn",
              "loop-rotate", "dce"]
    config = ReplayConfig(pipeline=",".join(passes))
    finding = RuleBisector(instance, config,
                           lambda c: "mneme-flip-icmp" not in c.pipeline).run()
    assert (finding.stage, finding.culprit, finding.position) == ("pass", "mneme-flip-icmp", 4)
    assert finding.replays <= 2 + 3  # as given, no pass, then log2(8) prefixes
    assert "-  ; sroa,sccp,instcombine None" in finding.ir_diff
    # default<On>: the smallest failing opt-bisect limit, named from LLVM's log.
    finding = RuleBisector(instance, ReplayConfig(), lambda c: c.opt_bisect_limit is not None
                           and c.opt_bisect_limit < 27).run()
    assert (finding.culprit, finding.position, finding.function) == ("pass27", 27,
                                                                      "_Z3addPKfS0_Pfi")
    assert finding.replays <= 2 + 6


def test_bisection_names_a_numerics_change_first(instance):
    """The synthetic build is -O3 with fast contraction (tests/synthetic_db.py)."""
    config = ReplayConfig(fp_contract="off", ptxas_opt_level=1, launch_bounds=True)
    finding = RuleBisector(instance, config, lambda c: c.fp_contract is None).run()
    assert (finding.stage, finding.culprit) == ("numerics", "fp_contract")
    assert "not a miscompile" in finding.message and finding.replays == 2
    # With contraction on, ptxas's level matters too (with it off, nothing contracts).
    config = ReplayConfig(fp_contract="on", ptxas_opt_level=1)
    finding = RuleBisector(instance, config, lambda c: c.pin_contraction).run()
    assert (finding.stage, finding.culprit) == ("numerics", "ptxas contraction")
    # Only the pipeline's level changes the numerics: named, with advice.
    finding = RuleBisector(instance, ReplayConfig(pipeline="default<O0>"), lambda c: False).run()
    assert (finding.stage, finding.culprit) == ("numerics", "pipeline level")
    assert "mneme diff" in finding.message
    # A failure the numerics do not explain goes on to the passes.
    finding = RuleBisector(instance, ReplayConfig(fp_contract="off"), lambda c: c.opt_bisect_limit
                           is not None and c.opt_bisect_limit < 5).run()
    assert finding.stage == "pass" and finding.position == 5


def test_bisection_falls_back_to_transforms_then_ptxas(instance):
    config = ReplayConfig(pipeline="sroa,gvn", launch_bounds=True, specialize_dims=True)
    finding = RuleBisector(instance, config, lambda c: not c.launch_bounds).run()
    assert (finding.stage, finding.culprit) == ("transform", "launch_bounds")
    finding = RuleBisector(instance, config, lambda c: c.ptxas_opt_level < 2).run()
    assert (finding.stage, finding.culprit) == ("ptxas", "ptxas -O2")
    finding = RuleBisector(instance, config, lambda c: False).run()
    assert finding.stage == "unexplained" and "not an optimisation" in finding.message
    finding = RuleBisector(instance, config, lambda c: True).run()
    assert finding.stage == "none" and finding.message.startswith("nothing to find")
    with pytest.raises(UsageError, match="a baseline config compiles nothing"):
        Bisector(instance, ReplayConfig(baseline="ir"))


def test_element_types_are_read_off_the_kernels_ir(tmp_path):
    """From a real mneme-cxx build: pointers used as one element type get it."""
    from conftest import EXAMPLES

    from mneme_cc.drivers.embedded import read_embedded_modules
    from mneme_cc.replay.judging.dtypes import kernel_pointer_dtypes

    found = {}
    for name, kernel in (("vector_add", "_Z10vector_addPKfS0_Pfi"),
                         ("cg", "_Z4spmviPKiS0_PKdS2_Pd"),
                         ("fp_physics", "_Z6forcesPK4Vec3PKfPS_if"),
                         ("jacobi_norm", "_Z5relaxPKfS0_PfS1_if")):
        obj = tmp_path / f"{name}.o"
        run(["mneme-cxx", "-O3", "-I", str(EXAMPLES / "common"), "-c",
             str(EXAMPLES / name / f"{name}.cu"), "-o", str(obj)])
        (module,) = read_embedded_modules(obj)
        found[name] = kernel_pointer_dtypes(module.bitcode, kernel, "sm_90")
    assert found["vector_add"] == {0: "float32", 1: "float32", 2: "float32"}
    # spmv(n, rowptr, col, val, x, y): n is no pointer.
    assert found["cg"] == {1: "int32", 2: "int32", 3: "float64", 4: "float64", 5: "float64"}
    # forces(pos, charge, force, n, soft): pos and force are struct {float x, y, z;}*.
    assert found["fp_physics"] == {0: "float32", 1: "float32", 2: "float32"}
    # relax(u, f, out, norm, n, h2): norm is only ever the target of atomicAdd.
    assert found["jacobi_norm"] == {0: "float32", 1: "float32", 2: "float32", 3: "float32"}
