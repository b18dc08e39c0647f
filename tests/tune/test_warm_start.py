"""Warm start: a new study first runs what won in related studies of the
same database (the GPU side is the fake executor's)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from tune_doubles import H100, FakeExecutor

from mneme_cc.tune import warm_start
from mneme_cc.tune.space import Categorical, Int, Real, SearchSpace
from mneme_cc.tune.tuner import Tuner, TuneSettings


def study(instance, name: str, **settings):
    FakeExecutor.submitted = []
    base = {"trials": 12, "sampler": "random", "seed": 3, "compile_workers": 2,
            "space": "quick", "study_name": name}
    return Tuner(instance, TuneSettings(**{**base, **settings}), props=H100,
                 executor=FakeExecutor).run()


def trials(instance, name: str) -> list[dict]:
    path = instance.db.path / "tune" / name / "trials.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_new_study_first_runs_the_best_of_the_kernel_s_other_studies(instance):
    first = study(instance, "first")
    assert first["warm_start"] == []  # nothing to learn from yet
    ran = [t for t in trials(instance, "first") if t["outcome"] == "verified"
           and not t["duplicate"]]
    best = sorted(ran, key=lambda t: (t["median_ms"], t["trial"]))[:warm_start.PER_STUDY]
    second = study(instance, "second", seed=99)
    seeded = second["warm_start"]
    assert [s["params"] for s in seeded] == [t["params"] for t in best]
    assert {s["study"] for s in seeded} == {"first"} and seeded[0]["why"] == "the same kernel"
    assert seeded[0]["speedup"] == round(1.0 / best[0]["median_ms"], 4)  # the fake baseline: 1 ms
    # The seeds run first, after the application's own settings (trial 0;
    # one the seeds hold already is not enqueued twice).
    by_number = sorted(trials(instance, "second"), key=lambda t: t["trial"])
    opening = [t["params"] for t in by_number[:len(seeded) + 1]]
    assert all(s["params"] in opening for s in seeded)
    assert second["best_median_ms"] <= best[0]["median_ms"]
    off = study(instance, "third", warm_start=False)
    assert off["warm_start"] == []


def test_seeds_keep_only_what_this_space_takes():
    class Space(SearchSpace):
        def __init__(self):
            pass

        def dimensions(self):
            return [Categorical("pipeline", ("default<O2>", "default<O3>")),
                    Int("block", 32, 1024, step=32),
                    Categorical("bounds", (False, True)),
                    Int("min_blocks", 1, 8, when=("bounds", (True,))),
                    Real("fraction", 0.0, 1.0)]

    space = Space()
    assert warm_start.fitted(space, {"pipeline": "default<O3>", "block": 96, "bounds": True,
                                     "min_blocks": 4, "fraction": 0.5, "gone": 1}) == \
        {"pipeline": "default<O3>", "block": 96, "bounds": True, "min_blocks": 4,
         "fraction": 0.5}
    # Values the space does not allow, and a dimension whose condition fails, are left out.
    assert warm_start.fitted(space, {"pipeline": "default<O1>", "block": 100, "bounds": False,
                                     "min_blocks": 4, "fraction": 2.0}) == {"bounds": False}
    assert warm_start.fitted(space, {"block": True, "bounds": 1}) == {}  # bool is no int here


def test_instruction_mixes_follow_calls_and_compare_by_shape():
    ir = """define void @k(ptr %p) {
  %a = load float, ptr %p
  %b = fmul float %a, %a
  %c = call float @helper(float %b)
  %d = call float @__nv_expf(float %c)
  store float %d, ptr %p
  ret void
}
define float @helper(float %x) {
  %y = fadd float %x, 1.0
  %z = call float @llvm.fma.f32(float %x, float %x, float %y)
  ret float %z
}
define float @__nv_expf(float %x) {
  %y = fmul float %x, 2.0
  ret float %y
}
"""
    mix = warm_start.instruction_mix(ir, "k")
    assert mix == Counter({"float": 2, "load": 1, "store": 1, "math": 1, "fused": 1})
    assert warm_start.similarity(mix, mix) == pytest.approx(1.0)
    assert warm_start.similarity(mix, Counter({"int": 5, "branch": 2})) == 0.0
    assert warm_start.similarity(mix, Counter()) == 0.0


def test_trials_to_near_best_counts_asks_until_within_two_percent(instance):
    assert warm_start.near_best_after([]) is None
    # Trial numbers count every ask (pruned ones too): the 4th ask was within 2%.
    assert warm_start.near_best_after([(0, 1.0), (3, 0.70), (9, 0.69)]) == 4
    assert warm_start.near_best_after([(2, 0.5)]) == 3
    summary = study(instance, "counted")
    # The study's count is the one its trials give: the first verified trial
    # within 2% of the best median, by trial number.
    passed = [(t["trial"], t["median_ms"]) for t in trials(instance, "counted")
              if t["outcome"] == "verified"]
    best = min(ms for _, ms in passed)
    first = min(n for n, ms in passed if ms <= best * warm_start.NEAR_BEST)
    assert summary["trials_to_near_best"] == first + 1
    assert summary["best_median_ms"] == best


def test_damaged_source_studies_are_passed_over(instance):
    """summary.json and trials.jsonl are untrusted: wrong types, ties, a
    directory where a file belongs; the new study starts regardless."""
    study(instance, "good")
    tune = instance.db.path / "tune"
    for name, summary, trials in [
            ("typed", {"study": "typed", "instance": instance.name, "baseline": 5}, ""),
            ("nan", {"study": "nan", "instance": instance.name,
                     "baseline": {"median_ms": float("nan")}}, ""),
            ("empty", {"study": "empty", "instance": ""}, ""),
            ("ties", {"study": "ties", "instance": instance.name,
                      "baseline": {"median_ms": 1.0}},
             "".join(json.dumps({"trial": 1, "outcome": "verified", "params": {"x": i},
                                 "median_ms": 0.5}) + "\n" for i in range(2)))]:
        (tune / name).mkdir()
        (tune / name / "summary.json").write_text(json.dumps(summary))
        (tune / name / "trials.jsonl").write_text(trials)
    (tune / "dir").mkdir()
    (tune / "dir" / "summary.json").mkdir()
    summary = study(instance, "after")
    assert {s["study"] for s in summary["warm_start"]} == {"good"}

