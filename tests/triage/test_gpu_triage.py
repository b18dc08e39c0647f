"""GPU tier: saved replay outputs, mneme diff, and bisection of a planted miscompile."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run

from mneme_cc.record.db import RecordDB

pytestmark = pytest.mark.gpu

#: A pass list with a deliberately wrong transformation fourth: it flips the
#: kernel's first comparison (vector_add's `i < n`), so no element is written.
PLANTED = "sroa,sccp,instcombine,mneme-flip-icmp,simplifycfg,gvn,loop-rotate,dce"


@pytest.fixture
def vector_add(example_binaries, tmp_path):
    db = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db), "--", str(example_binaries / "vector_add"),
         "1000000"])
    (inst,) = RecordDB(db).instances
    return inst


def test_saved_outputs_diff_against_the_recording(vector_add, tmp_path):
    db, inst = str(vector_add.db.path), vector_add
    good, bad = tmp_path / "good", tmp_path / "bad"
    run(["mneme", "replay", "-rdb", db, "--save-output", str(good), "--json"])
    assert run(["mneme", "diff", "-rdb", db, str(good)]).returncode == 0
    out = run(["mneme", "replay", "-rdb", db, "sroa,mneme-drop-store", "--save-output",
               str(bad), "--json"], check=False)
    assert out.returncode == 1 and json.loads(out.stdout)["saved_output"] == str(bad)
    out = run(["mneme", "diff", "-rdb", db, str(bad), "--dtype", "arg:2=float32"], check=False)
    assert out.returncode == 1
    (d,) = [b for b in json.loads(out.stdout)["buffers"] if b["bytes_differing"]]
    # Checked independently: the dropped store leaves c as it was before the launch.
    c = int(inst.arg_as(2, np.uint64))
    before = inst.prologue.region(c).array(np.float32)
    after = inst.epilogue.region(c).array(np.float32)
    changed = before.view(np.uint32) != after.view(np.uint32)
    assert d["name"] == f"allocation {c:#x}" and d["differing"] == int(changed.sum())
    finite = np.isfinite(before) & np.isfinite(after) & changed
    assert d["max_abs"] == float(np.abs(after[finite].astype(np.float64)
                                        - before[finite].astype(np.float64)).max())
    # Without --dtype the element type comes from the kernel's IR (c is a float*).
    out = run(["mneme", "diff", "-rdb", db, str(bad)], check=False)
    (inferred,) = [b for b in json.loads(out.stdout)["buffers"] if b["bytes_differing"]]
    assert inferred == d
    # Two configurations replayed on the fly: O0 and O3 agree bit for bit.
    o0, o3 = tmp_path / "o0.json", tmp_path / "o3.json"
    o0.write_text(json.dumps({"pipeline": "default<O0>"}))
    o3.write_text(json.dumps({"pipeline": "default<O3>"}))
    out = run(["mneme", "diff", "-rdb", db, "--config", str(o0), "--config", str(o3)])
    assert json.loads(out.stdout)["same"]


def test_bisect_names_a_planted_miscompile_and_shows_its_ir(vector_add, tmp_path):
    db = str(vector_add.db.path)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"pipeline": PLANTED}))
    out = run(["mneme", "bisect", "-rdb", db, "--config", str(bad)], check=False)
    assert out.returncode == 1, out.stderr
    finding = json.loads(out.stdout)
    assert (finding["stage"], finding["culprit"], finding["position"]) == \
        ("pass", "mneme-flip-icmp", 4)
    removed = [x for x in finding["ir_diff"].splitlines() if x.startswith("-") and " icmp " in x]
    added = [x for x in finding["ir_diff"].splitlines() if x.startswith("+") and " icmp " in x]
    assert removed and added and removed[0].split(" icmp ")[1].split()[0] != \
        added[0].split(" icmp ")[1].split()[0]
    # As given, no pass, then a binary search over 8 prefixes.
    assert finding["replays"] == len(finding["steps"]) <= 5
    print(json.dumps({"replays": finding["replays"], "diff": finding["ir_diff"]}))


def test_bisect_of_a_good_config_and_of_a_bad_transform(vector_add, tmp_path):
    db = str(vector_add.db.path)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"pipeline": "default<O2>"}))
    out = run(["mneme", "bisect", "-rdb", db, "--config", str(good)])
    assert json.loads(out.stdout)["message"].startswith("nothing to find")
    # Launch bounds of 64 threads on the recorded 256-thread blocks: the launch
    # fails however the IR was optimised, and not without the bounds.
    bounds = tmp_path / "bounds.json"
    bounds.write_text(json.dumps({"pipeline": "default<O3>", "launch_bounds": True,
                                  "max_threads": 64}))
    out = run(["mneme", "bisect", "-rdb", db, "--config", str(bounds)], check=False)
    finding = json.loads(out.stdout)
    assert out.returncode == 1 and (finding["stage"], finding["culprit"]) == \
        ("transform", "launch_bounds")


def test_reassociation_diff_has_ulp_statistics_checked_independently(example_binaries,
                                                                     tmp_path):
    """Two replays that differ only in floating-point reassociation:
    out = (x + 2^23) - 2^23 rounds x to an integer; reassociated, it is x."""
    from mneme_cc.replay.output import open_output

    db = tmp_path / "db"
    run(["mneme", "record", "-rdb", str(db), "--", str(example_binaries / "reassociation"),
         "100000"])
    (inst,) = RecordDB(db).instances
    strict, loose = tmp_path / "strict", tmp_path / "loose"
    run(["mneme", "replay", "-rdb", str(db), "--save-output", str(strict), "--json"])
    out = run(["mneme", "replay", "-rdb", str(db), "--fp-reassociate", "--save-output",
               str(loose), "--json"], check=False)
    assert out.returncode == 1  # reassociated, it no longer matches the application
    out = run(["mneme", "diff", str(strict), str(loose), "--dtype", "arg:1=float32"],
              check=False)
    assert out.returncode == 1
    report = json.loads(out.stdout)
    (d,) = [b for b in report["buffers"] if b["bytes_differing"]]
    # Independently: what each run must have computed, from the recorded input.
    x = inst.prologue.region(int(inst.arg_as(0, np.uint64))).array(np.float32)[:100000]
    shift = np.float32(2 ** 23)
    rounded = (x + shift) - shift
    address = int(inst.arg_as(1, np.uint64))
    a = open_output(strict)[1].region(address).array(np.float32)[:100000]
    b = open_output(loose)[1].region(address).array(np.float32)[:100000]
    assert np.array_equal(a, rounded) and np.array_equal(b, x)
    differ = rounded != x
    # Both sides are non-negative: ULPs are differences of the bit patterns.
    ulps = np.abs(rounded.view(np.int32).astype(np.int64) - x.view(np.int32).astype(np.int64))
    delta = np.abs(rounded.astype(np.float64) - x.astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(rounded != 0, delta / np.abs(rounded.astype(np.float64)), np.inf)
    assert d["dtype"] == "float32" and d["differing"] == int(differ.sum()) > 0
    assert d["max_ulp"] == int(ulps[differ].max())
    assert d["max_abs"] == float(delta[differ].max()) <= 0.5
    assert d["max_rel"] == float(rel[differ].max())
    assert d["nan_mismatches"] == d["inf_mismatches"] == d["signed_zeros"] == 0
