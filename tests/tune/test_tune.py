"""CPU tier: search spaces, samplers, outcomes, the tuning loop and export.

The GPU stage is a test double here (FakeExecutor); tests/tune/test_gpu_tune.py
runs the real one.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import stat
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from conftest import run, tool_env
from tune_doubles import H100, FakeExecutor, assert_one_study

from mneme_cc.errors import UsageError
from mneme_cc.replay import outcome as oc
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.tune.executor import TrialResult
from mneme_cc.tune.export import export, proteus_entry
from mneme_cc.tune.presets import load_space
from mneme_cc.tune.samplers import make_sampler, parse_objectives
from mneme_cc.tune.space import (
    Categorical,
    Combined,
    Geometry,
    LaunchBounds,
    Pipelines,
    SearchSpace,
    Specialization,
    TuningOptions,
    pick,
)
from mneme_cc.tune.storage import open_storage
from mneme_cc.tune.tpe_window import TrialWindow
from mneme_cc.tune.tuner import Tuner, TuneSettings


def test_pick_maps_fractions_onto_options():
    sizes = range(32, 1025, 32)
    assert pick(0.0, sizes) == 32 and pick(1.0, sizes) == 1024 and pick(0.5, sizes) == 544
    with pytest.raises(UsageError):
        pick(0.5, [])


def test_builtin_spaces_follow_the_instance_and_the_gpu(instance):
    assert instance.scalar_params() == (3,)  # three pointers into the window, then n
    bounds = LaunchBounds(instance, H100)
    (flag, min_blocks) = bounds.dimensions()
    # 256-thread blocks: at most 2048 / 256 = 8 resident per SM.
    assert min_blocks.high == 8 and min_blocks.when == ("launch_bounds", (True,))
    geometry = Geometry(instance, H100)
    (block,) = geometry.dimensions()
    assert (block.low, block.high, block.step) == (32, 1024, 32)
    # The grid covers the recorded 4 x 256 threads at every block size.
    assert geometry.fields({"block": 96}) == {"block": (96, 1, 1), "grid": (11, 1, 1)}
    assert Specialization(instance, H100).fields(
        {"specialize_args": True, "specialize_dims": False})["specialize_args"] == (3,)


def test_derive_is_deterministic_and_grounded(instance):
    space = load_space("standard", instance, H100)
    off = {"pipeline": "default<O2>", "specialize_args": True, "specialize_dims": True,
           "launch_bounds": False, "ptxas_opt_level": 3, "max_registers": None}
    config = space.derive(off)
    assert config == space.derive(dict(off)) and config.specialize_args == (3,)
    assert config.min_blocks_per_sm is None and config.pipeline == "default<O2>"
    on = space.derive({**off, "launch_bounds": True, "min_blocks_per_sm": 4})
    assert on.launch_bounds and on.min_blocks_per_sm == 4 and on.key() != config.key()


def test_combinations_honour_conditions(instance):
    space = Combined(instance, H100, [Pipelines, LaunchBounds])
    combos = list(space.combinations())
    # 4 levels x (no bounds + bounds with 1..8 blocks)
    assert len(combos) == 4 * (1 + 8)
    assert all(("min_blocks_per_sm" in c) == c["launch_bounds"] for c in combos)
    options = list(Combined(instance, H100, [Pipelines, TuningOptions]).combinations())
    assert len(options) == 2 + 2 * 2 ** 4  # O0, O1, then O2 and O3 with 4 tuning flags
    tuned = [c for c in options if "loop_unrolling" in c]
    assert all(c["pipeline"] in ("default<O2>", "default<O3>") for c in tuned)


def test_custom_space_from_a_file(instance, tmp_path):
    path = tmp_path / "myspace.py"
    path.write_text(
        "from mneme_cc.tune.space import SearchSpace, Real, pick\n"
        "class Blocks(SearchSpace):\n"
        "    def dimensions(self):\n"
        "        return [Real('fraction', 0.0, 1.0)]\n"
        "    def fields(self, params):\n"
        "        sizes = range(32, self.props.max_threads_per_block + 1, 32)\n"
        "        return {'block': pick(params['fraction'], sizes)}\n")
    space = load_space(f"{path}:Blocks", instance, H100)
    assert space.derive({"fraction": 1.0}).block == (1024, 1, 1)
    with pytest.raises(UsageError, match="exhaustive search needs every parameter discrete"):
        space.combinations()
    with pytest.raises(UsageError, match="has no SearchSpace subclass Nope"):
        load_space(f"{path}:Nope", instance, H100)
    with pytest.raises(UsageError, match="does not exist"):
        load_space(f"{tmp_path}/absent.py:Blocks", instance, H100)
    with pytest.raises(UsageError, match="unknown space 'fastest'"):
        load_space("fastest", instance, H100)


def test_samplers_and_objectives():
    import optuna

    assert isinstance(make_sampler("tpe"), optuna.samplers.TPESampler)
    import pickle

    assert isinstance(pickle.loads(pickle.dumps(make_sampler("tpe"))),  # as joblib would
                      optuna.samplers.TPESampler)
    assert isinstance(make_sampler("nsga2", objectives=2), optuna.samplers.NSGAIISampler)
    with pytest.raises(UsageError, match="unknown sampler 'annealing'"):
        make_sampler("annealing")
    with pytest.raises(UsageError, match="takes one objective"):
        make_sampler("gp", objectives=2)
    assert parse_objectives("time,registers") == ["time", "registers"]
    with pytest.raises(UsageError, match="unknown objective"):
        parse_objectives("speed")


def _frozen(number: int, state: str, value: float | None = None):
    import optuna

    distributions = {"x": optuna.distributions.FloatDistribution(0, 1)}
    trial = optuna.trial.create_trial(
        state=getattr(optuna.trial.TrialState, state), params={"x": 0.5},
        distributions=distributions, value=value)
    trial.number = number
    return trial


def test_the_trial_window_keeps_the_open_the_best_and_the_latest():
    import optuna

    window = TrialWindow(latest=4, best=2)
    trials = [_frozen(0, "COMPLETE", 0.5), _frozen(1, "RUNNING"), _frozen(2, "COMPLETE", 0.1),
              *(_frozen(n, "COMPLETE", 5.0 + n) for n in range(3, 9)), _frozen(9, "PRUNED"),
              _frozen(10, "RUNNING")]
    window.look(trials)
    # The two best (0 and 2), the latest four finished (6..9) and the running (1, 10).
    assert [t.number for t in window.select()] == [0, 1, 2, 6, 7, 8, 9, 10]
    complete = (optuna.trial.TrialState.COMPLETE,)
    assert [t.number for t in window.select(complete)] == [0, 2, 6, 7, 8]
    # Trial 1 finishes, the best of all: trial 0 is no longer among the two
    # best, and trial 6 falls out of the latest. Only the open and the new are read.
    trials[1] = _frozen(1, "COMPLETE", 0.01)
    trials.append(_frozen(11, "RUNNING"))
    read = []

    class Watched(list):
        def __getitem__(self, number):
            read.append(number)
            return super().__getitem__(number)

    window.look(Watched(trials))
    assert sorted(read) == [1, 10, 11]
    assert [t.number for t in window.select()] == [1, 2, 7, 8, 9, 10, 11]
    assert [t.number for t in window.select(complete)] == [1, 2, 7, 8]
    assert window.open == {10, 11}


@pytest.mark.parametrize("journal", [True, False])
def test_tpe_samples_a_long_study_from_its_window(journal, tmp_path, monkeypatch):
    """On a journal the window reads the new and the open trials one by one;
    on another storage (here Optuna's in-memory one) the study's list."""
    import optuna

    from mneme_cc.tune import tpe_window

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    monkeypatch.setattr(tpe_window, "TPE_LATEST", 30)
    monkeypatch.setattr(tpe_window, "TPE_BEST_KEPT", 10)
    study = optuna.create_study(storage=open_storage(None, tmp_path) if journal else None,
                                sampler=make_sampler("tpe", seed=3))
    seen = []  # (trials in the study, trials TPE was given) for each of TPE's reads
    get_trials = tpe_window._Windowed._get_trials

    def spying(self, deepcopy=True, states=None, use_cache=False):
        given = get_trials(self, deepcopy, states, use_cache)
        seen.append((len(self._study.trials), len(given)))
        return given

    monkeypatch.setattr(tpe_window._Windowed, "_get_trials", spying)
    study.optimize(lambda t: (t.suggest_float("x", -4, 4) - 1.5) ** 2, n_trials=150)
    assert max(total for total, _ in seen) == 150  # TPE read the whole study ...
    # ... and was given a window of at most 40 finished trials and the one sampled
    assert 35 <= max(given for _, given in seen) <= 41
    assert abs(study.best_params["x"] - 1.5) < 0.2  # and still found the minimum
    import pickle

    copied = pickle.loads(pickle.dumps(study.sampler))  # used, as joblib would copy it
    assert copied._read is None and copied._windows.keys() == study.sampler._windows.keys()
    # A multi-objective study's TPE is given every trial.
    seen.clear()
    both = optuna.create_study(directions=["minimize", "minimize"],
                               sampler=make_sampler("tpe", objectives=2, seed=3))
    both.optimize(lambda t: (t.suggest_float("x", 0, 1), 1 - t.params["x"]), n_trials=60)
    assert max(given for _, given in seen) >= 59


@pytest.mark.parametrize("code, outcome", [
    ("CUDA_ERROR_INVALID_VALUE", oc.INVALID_LAUNCH),
    ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", oc.INVALID_LAUNCH),
    ("CUDA_ERROR_ILLEGAL_ADDRESS", oc.RUNTIME_ERROR),
    ("CUDA_ERROR_INVALID_PTX", oc.COMPILE_ERROR),
    (None, oc.RUNTIME_ERROR),
])
def test_device_errors_are_classified(code, outcome):
    assert oc.classify_device_error(code) == outcome


def tune(instance, tmp_path, **settings):
    """A study with the fake executor; the loop's tests run every configuration
    (test_a_bitwise_study_keeps_the_builds_numerics covers the default)."""
    FakeExecutor.submitted = []
    defaults = {"trials": 40, "sampler": "random", "seed": 1, "compile_workers": 2,
                "out_dir": tmp_path / "study", "allow_numerics_change": True}
    tuner = Tuner(instance, TuneSettings(**{**defaults, **settings}), props=H100,
                  executor=FakeExecutor)
    return tuner, tuner.run()


def test_a_bitwise_study_keeps_the_builds_numerics(instance, tmp_path):
    """The instance's build is -O3 with fast contraction: O0 pipelines change
    which multiply-adds fuse and are left out; other ptxas levels run pinned."""
    tuner, summary = tune(instance, tmp_path, space="standard", trials=60,
                          allow_numerics_change=False)
    ran = [c for c in FakeExecutor.submitted if c.baseline is None]
    assert ran and all(c.pipeline != "default<O0>" for c in ran)
    assert all(c.pin_contraction == (c.ptxas_opt_level != 3) for c in ran)
    assert {c.ptxas_opt_level for c in ran} == {0, 1, 2, 3}
    pruned = [t for t in tuner.study.get_trials() if "numerics" in t.user_attrs.get("constraint", "")]
    assert pruned and all(t.params["pipeline"] == "default<O0>" for t in pruned)
    assert summary["outcomes"]["numerics_changing"] == len(pruned)
    assert pruned[0].user_attrs["constraint"].startswith("numerics-changing: the default<O0>")


class FusingExecutor(FakeExecutor):
    """O1 and O2 pipelines fail as the contraction probe explains, after they ran."""

    def submit(self, config):
        if config.baseline is None and config.pipeline in ("default<O1>", "default<O2>"):
            FakeExecutor.submitted.append(config)
            future = Future()
            future.set_result(TrialResult(oc.NUMERICS_CHANGING, config, error="fuses others"))
            return future
        return super().submit(config)


def test_the_sampler_learns_from_configurations_ruled_out_after_they_ran(instance, tmp_path,
                                                                        monkeypatch):
    """Failed trials end PRUNED, as those ruled out before they ran (TPE leaves
    FAIL trials out of its model and would keep proposing their neighbours);
    only a cancelled trial, which found nothing, is FAIL."""
    import optuna

    from mneme_cc.tune import bitwise

    monkeypatch.setattr(bitwise, "LEARNED_AFTER", 10**9)  # the sampler alone
    ruled_out = {}
    for sampler in ("random", "tpe"):
        tuner = Tuner(instance, TuneSettings(
            trials=150, sampler=sampler, seed=1, compile_workers=2, space="standard",
            out_dir=tmp_path / sampler, allow_numerics_change=True), props=H100,
            executor=FusingExecutor)
        summary = tuner.run()
        ruled_out[sampler] = summary["outcomes"][oc.NUMERICS_CHANGING]
        state = optuna.trial.TrialState
        for trial in tuner.study.get_trials():
            outcome = trial.user_attrs.get("result", {}).get("outcome")
            if outcome in (oc.VERIFIED, None):
                continue
            assert trial.state == (state.FAIL if outcome == oc.CANCELLED else state.PRUNED)
    assert ruled_out["tpe"] < 0.7 * ruled_out["random"], ruled_out


def test_a_bitwise_study_learns_which_values_change_the_numerics(instance, tmp_path):
    """O1 and O2 fail as the contraction probe explains, whatever else the
    configuration holds: once each has been the one never-verified value of 8
    such trials, configurations with it are pruned before they run, saying
    why, but for one in RECHECK_EVERY. A study that allows numerics changes
    learns nothing."""
    from mneme_cc.tune.bitwise import LEARNED_AFTER

    runs = {}
    for allowed in (False, True):
        FakeExecutor.submitted = []
        tuner = Tuner(instance, TuneSettings(
            trials=300, sampler="random", seed=2, compile_workers=2, space="standard",
            out_dir=tmp_path / f"study-{allowed}", allow_numerics_change=allowed), props=H100,
            executor=FusingExecutor)
        summary = tuner.run()
        runs[allowed] = [c.pipeline for c in FakeExecutor.submitted if c.baseline is None]
        if allowed:
            assert summary["learned_numerics"] == {}
            continue
        assert summary["learned_numerics"].keys() == {"pipeline='default<O1>'",
                                                      "pipeline='default<O2>'"}
        pruned = [t for t in tuner.study.get_trials()
                  if "fused other multiply-adds" in t.user_attrs.get("constraint", "")]
        assert pruned and all(t.params["pipeline"] in ("default<O1>", "default<O2>")
                              for t in pruned)
        assert pruned[0].user_attrs["constraint"].startswith(
            "numerics-changing: pipeline='default<O")
    for pipeline in ("default<O1>", "default<O2>"):
        learning, allowed = runs[False].count(pipeline), runs[True].count(pipeline)
        assert LEARNED_AFTER <= learning < allowed / 2, (pipeline, learning, allowed)


def test_a_new_study_starts_from_what_the_same_kernels_studies_ran(instance):
    """Warm start also hands a bitwise study the other studies' verdicts: the
    second study of the kernel prunes O1 and O2 from its start."""
    def study(name, warm_start):
        FakeExecutor.submitted = []
        tuner = Tuner(instance, TuneSettings(
            trials=300, sampler="random", seed=2, compile_workers=2, space="standard",
            study_name=name, allow_numerics_change=False, warm_start=warm_start),
            props=H100, executor=FusingExecutor)
        summary = tuner.run()
        ran = [c.pipeline for c in FakeExecutor.submitted if c.baseline is None]
        return summary, sum(p in ("default<O1>", "default<O2>") for p in ran)

    first, fused_first = study("first", warm_start=False)
    assert len(first["learned_numerics"]) == 2
    cold, fused_cold = study("cold", warm_start=False)
    warm, fused_warm = study("warm", warm_start=True)
    assert warm["learned_numerics"].keys() == first["learned_numerics"].keys()
    assert fused_warm < fused_cold / 2, (fused_warm, fused_cold)  # one in 16 still runs


def test_a_value_a_verified_trial_had_is_never_learned():
    from mneme_cc.tune.bitwise import LearnedNumerics

    learned = LearnedNumerics(after=2)
    fused = {"unroll": False, "level": 3}
    learned.told({"unroll": True, "level": 3}, oc.VERIFIED)
    learned.told({"unroll": False, "level": 2}, oc.NUMERICS_CHANGING)  # two suspects: no blame
    learned.told(fused, oc.NUMERICS_CHANGING)
    learned.told(fused, oc.NUMERICS_CHANGING, duplicate=True)  # blamed once already
    assert learned.reason(fused) is None
    learned.told(fused, oc.FAILED_VERIFICATION)  # a miscompile is not the numerics
    learned.told(fused, oc.NUMERICS_CHANGING)
    assert learned.summary() == {"unroll=False": 2}
    why = {learned.reason({"level": level, "unroll": False}) for level in range(64)}
    assert None in why and len(why) == 2  # a few run anyway, drawn from their parameters
    assert learned.reason(fused) == learned.reason(fused)
    assert next(filter(None, why)) == (
        "numerics-changing: unroll=False fused other multiply-adds than the build in 2 trials "
        "where it was the only value no verified trial had (the contraction probe)")
    learned.told({"unroll": False, "level": 1}, oc.VERIFIED, duplicate=True)  # a repeat ran it
    assert learned.reason(fused) is None and learned.summary() == {}
    learned.told(fused, oc.NUMERICS_CHANGING)
    assert learned.reason(fused) is None  # never again


def test_a_resumed_study_starts_from_what_its_trials_showed():
    from mneme_cc.tune.bitwise import LearnedNumerics

    def result(outcome, key):
        return {"outcome": outcome, "config": {"key": key}}

    fused = {"unroll": False, "level": 3}
    earlier = [({"unroll": True, "level": 3}, result(oc.VERIFIED, 1))] + \
        [(fused, result(oc.NUMERICS_CHANGING, 2))] * 3 + \
        [({"unroll": False, "level": level}, result(oc.NUMERICS_CHANGING, 3 + level))
         for level in (1, 2)]
    learned = LearnedNumerics(after=3)
    learned.told_earlier([(fused, "not a result")] + earlier)  # a damaged trial is passed over
    # The repeats of key 2 count once; levels 1 and 2 never verified.
    assert learned.summary() == {}
    learned = LearnedNumerics(after=3)  # once levels 1 and 2 verified, unroll=False is blamed
    learned.told_earlier([({"unroll": True, "level": level}, result(oc.VERIFIED, 9 + level))
                          for level in (1, 2)] + earlier)
    assert learned.summary() == {"unroll=False": 3}
    off = LearnedNumerics(enabled=False)
    off.told_earlier(earlier * 3)
    assert off.summary() == {} and off.reason(fused) is None


def test_a_study_with_tolerances_runs_numerics_changing_configurations(instance, tmp_path):
    policies = {"arg:2": {"dtype": "float32", "ulp": 4}}
    tuner, summary = tune(instance, tmp_path, space="standard", trials=40,
                          allow_numerics_change=False, verify=policies)
    ran = [c for c in FakeExecutor.submitted if c.baseline is None]
    assert any(c.pipeline == "default<O0>" for c in ran)
    assert all(c.verify == policies for c in FakeExecutor.submitted)
    assert "numerics_changing" not in summary["outcomes"]
    with pytest.raises(UsageError, match="it points into no allocation|not a pointer"):
        tune(instance, tmp_path / "bad", verify={"arg:3": {"dtype": "int32"}})
    assert not (tmp_path / "bad" / "study").exists()


def test_the_tuning_loop_classifies_and_keeps_the_best_verified(instance, tmp_path):
    tuner, summary = tune(instance, tmp_path, space="standard")
    lines = [json.loads(x) for x in (tmp_path / "study" / "trials.jsonl").read_text().splitlines()]
    assert len(lines) == summary["trials"] == 40
    assert sum(summary["outcomes"].values()) == 40
    assert {x["outcome"] for x in lines} <= set(oc.OUTCOMES)
    verified = [x for x in lines if x["outcome"] == oc.VERIFIED]
    best = json.loads((tmp_path / "study" / "best.json").read_text())
    # Failed trials are never best: the best is the fastest verified one.
    assert best["median_ms"] == min(x["median_ms"] for x in verified)
    assert best["config"]["pipeline"] == "default<O3>" and best["config"]["specialize_args"]
    assert best["speedup"] == pytest.approx(1.0 / best["median_ms"])
    # Equivalent configurations run once.
    keys = [c.key() for c in FakeExecutor.submitted if not c.baseline]
    assert len(keys) == len(set(keys))
    assert sum(x["duplicate"] for x in lines) == 40 - len(keys)
    failed = [t for t in tuner.study.trials if t.user_attrs["result"]["outcome"] != oc.VERIFIED]
    assert failed and all(t.state.name == "PRUNED" for t in failed)  # so the sampler learns
    assert json.loads((tmp_path / "study" / "summary.json").read_text())["trials"] == 40


class SlowerThanTheApplication(FakeExecutor):
    """Every configuration verifies, and every one is slower than the application."""

    def submit(self, config):
        future = super().submit(config)
        result = future.result()
        if not config.baseline and result.verified:
            future = Future()
            future.set_result(dataclasses.replace(result, median_ms=result.median_ms + 1.0))
        return future


def test_a_study_that_never_beats_the_application_says_so_and_exports_nothing(
        instance, tmp_path):
    FakeExecutor.submitted = []
    settings = TuneSettings(trials=12, sampler="random", seed=1, compile_workers=2,
                            out_dir=tmp_path / "study", allow_numerics_change=True,
                            space="quick")
    summary = Tuner(instance, settings, props=H100, executor=SlowerThanTheApplication).run()
    assert summary["verdict"] == "no configuration beat the application"
    assert summary["speedup"] == 1.0 and summary["measured_speedup"] < 1.0
    best = json.loads((tmp_path / "study" / "best.json").read_text())
    assert best["beats_application"] is False and best["median_ms"] > 1.0
    proteus, mneme = tmp_path / "proteus.json", tmp_path / "mneme.json"
    out = run(["mneme", "export", str(tmp_path / "study" / "best.json"), "--proteus",
               str(proteus), "--mneme", str(mneme)])
    assert "no configuration beat the application" in out.stderr
    assert "nothing to deploy" in json.loads(out.stdout)[instance.kernel_name]["skipped"]
    assert not proteus.exists() and not mneme.exists()


def test_exhaustive_search_runs_every_combination_once(instance, tmp_path):
    _, summary = tune(instance, tmp_path, space="quick", sampler="exhaustive", trials=1000)
    # 4 levels x specialize_args x specialize_dims
    assert summary["trials"] == 16
    assert len({c.key() for c in FakeExecutor.submitted if not c.baseline}) == 16
    assert summary["outcomes"] == {oc.VERIFIED: 12, oc.FAILED_VERIFICATION: 4}


def test_an_exhaustive_auto_study_queues_the_geometry_calibrate_found(instance, tmp_path):
    # The fake GPU verifies auto's probe at half the block: the block is searched.
    from collections import Counter

    sizes = 6  # the warp multiples dividing the recorded 1,024 threads
    tuner, _ = tune(instance, tmp_path, space="auto", sampler="exhaustive", trials=2 * sizes)
    assert tuner.space.launch_agnostic and len(tuner.space.block_sizes()) == sizes
    # Enumerated with the rest (it varies fastest), not drawn at random.
    counts = Counter(t.params["block"] for t in tuner.study.trials)
    assert set(counts) == set(tuner.space.block_sizes()) and set(counts.values()) == {2}


def test_a_study_resumes_and_refuses_to_restart_silently(instance, tmp_path):
    tune(instance, tmp_path, space="quick", trials=5)
    with pytest.raises(UsageError, match="already exists.*--resume"):
        tune(instance, tmp_path, space="quick", trials=5)
    tuner, _ = tune(instance, tmp_path, space="quick", trials=10, resume=True, seed=2)
    assert len(tuner.study.trials) == 10
    lines = (tmp_path / "study" / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 10


def test_trials_of_a_killed_process_are_reclaimed_on_resume(instance, tmp_path):
    """A process killed mid-study leaves RUNNING trials; the next start fails
    them as stale, runs their combinations again and does not count them."""
    import subprocess

    tuner, _ = tune(instance, tmp_path, space="quick", sampler="exhaustive", trials=8)
    total = len(list(tuner.space.combinations()))
    assert total > 8
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs
    study = tuner.study
    left = []
    for params in list(tuner.space.combinations())[8:11]:  # what the killed process asked for
        study.enqueue_trial(params)
        trial = study.ask()
        trial.set_user_attr("owner", {**tuner.owner, "pid": dead.pid, "start": None})
        left.append(trial)
    # One of another machine (or container): not ours to judge.
    study.enqueue_trial(list(tuner.space.combinations())[11])
    elsewhere = study.ask()
    elsewhere.set_user_attr("owner", {**tuner.owner, "pids": "pid:[1]", "pid": dead.pid})
    state = tuner.state
    assert len(study.get_trials(states=(state.RUNNING,))) == 4
    tuner, _ = tune(instance, tmp_path, space="quick", sampler="exhaustive", trials=total,
                    resume=True)
    trials = tuner.study.get_trials()
    assert [t.number for t in trials if t.state == state.RUNNING] == [elsewhere.number]
    stale = [t for t in trials if "stale" in t.user_attrs]
    assert sorted(t.number for t in stale) == [t.number for t in left]
    assert all(t.state == state.FAIL for t in stale)
    evaluated = [json.loads(line)["params"] for line in
                 (tmp_path / "study" / "trials.jsonl").read_text().splitlines()]
    # Every combination once, the reclaimed ones too; the other machine's one
    # is still its own.
    assert len(evaluated) == total - 1
    assert len({json.dumps(p, sort_keys=True) for p in evaluated}) == total - 1


def test_several_objectives_keep_a_pareto_front(instance, tmp_path):
    tuner, summary = tune(instance, tmp_path, space="quick", sampler="nsga2",
                          objectives=["time", "registers"], trials=12)
    assert len(tuner.study.directions) == 2 and tuner.study.best_trials
    assert summary["objectives"] == ["time", "registers"]


def test_proteus_entry_has_every_field_with_its_type():
    config = ReplayConfig(pipeline="default<O2>", specialize_args=(3,), specialize_dims=True,
                          launch_bounds=True, min_blocks_per_sm=4).grounded()
    entry = proteus_entry(config, (256, 1, 1))
    assert entry == {"Pipeline": "default<O2>", "OptLevel": "2", "CodeGenOptLevel": 3,
                     "CodeGen": "rtc", "SpecializeArgs": True, "LaunchBounds": True,
                     "SpecializeDims": True, "SpecializeDimsRange": False,
                     "TunedMaxThreads": 256, "MinBlocksPerSM": 4}
    types = {"Pipeline": str, "OptLevel": str, "CodeGenOptLevel": int, "CodeGen": str,
             "SpecializeArgs": bool, "LaunchBounds": bool, "SpecializeDims": bool,
             "SpecializeDimsRange": bool, "TunedMaxThreads": int, "MinBlocksPerSM": int}
    assert all(type(entry[k]) is t for k, t in types.items())
    with pytest.raises(UsageError, match="Proteus cannot express max_registers"):
        proteus_entry(ReplayConfig(max_registers=64), (256, 1, 1))
    with pytest.raises(UsageError, match="pass list"):
        proteus_entry(ReplayConfig(pipeline="sroa,gvn"), (256, 1, 1))
    with pytest.raises(UsageError, match=r"the block 32x4x2 \(the application launches 8x8x4\)"):
        proteus_entry(ReplayConfig(block=(32, 4, 2), grid=(1, 16, 4)), (8, 8, 4))
    assert proteus_entry(ReplayConfig(block=(8, 8, 4)), (8, 8, 4))["TunedMaxThreads"] == 256
    with pytest.raises(UsageError, match=r"the grid 264x1x1 \(the application launches 4x1x1\)"):
        proteus_entry(ReplayConfig(block=(256, 1, 1), grid=(264, 1, 1)), (256, 1, 1), (4, 1, 1))


def test_export_merges_and_keys_geometry_by_launch_shape(instance, tmp_path):
    tune(instance, tmp_path, space="quick", trials=20)
    proteus = tmp_path / "proteus.json"
    proteus.write_text(json.dumps({"_Z5otherv": {"OptLevel": "1"}}))
    mneme = tmp_path / "tuned.json"
    export([tmp_path / "study" / "best.json"], proteus, mneme)
    table = json.loads(proteus.read_text())
    assert table["_Z5otherv"] == {"OptLevel": "1"}           # merged, not overwritten
    assert table["_Z3addPKfS0_Pfi"]["OptLevel"] == "3"
    own = json.loads(mneme.read_text())
    assert own["format"] == "mneme-tuned-kernels"
    (shape,) = own["kernels"]["_Z3addPKfS0_Pfi"]
    assert shape == "grid=4,1,1;block=256,1,1;smem=0"
    assert own["kernels"]["_Z3addPKfS0_Pfi"][shape]["config"]["pipeline"] == "default<O3>"
    proteus.write_text("{not json")
    with pytest.raises(UsageError, match="not JSON"):
        export([tmp_path / "study" / "best.json"], proteus, None)
    mneme.write_text(json.dumps({"format": "mneme-tuned-kernels", "version": 1, "kernels": []}))
    with pytest.raises(UsageError, match="'kernels' is not an object"):
        export([tmp_path / "study" / "best.json"], None, mneme)


def test_a_kernel_proteus_cannot_express_leaves_the_other_outputs_written(instance, tmp_path):
    tune(instance, tmp_path, space="quick", trials=6)
    best = json.loads((tmp_path / "study" / "best.json").read_text())
    plain, reshaped = tmp_path / "plain.json", tmp_path / "reshaped.json"
    plain.write_text(json.dumps({**best, "kernel": "_Z5plainv"}))
    reshaped.write_text(json.dumps({**best, "kernel": "_Z8reshapedv",
                                    "config": {**best["config"], "block": [128, 2, 1]}}))
    proteus, mneme = tmp_path / "proteus.json", tmp_path / "tuned.json"
    result = run(["mneme", "export", str(plain), str(reshaped), "--proteus", str(proteus),
                  "--mneme", str(mneme)], check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"not written to {proteus}: " in result.stderr and "128x2x1" in result.stderr
    assert "1 kernel(s) not written" in result.stderr and "other outputs are written" in \
        result.stderr and "earlier entry" not in result.stderr
    assert sorted(json.loads(proteus.read_text())) == ["_Z5plainv"]
    assert sorted(json.loads(mneme.read_text())["kernels"]) == ["_Z5plainv", "_Z8reshapedv"]
    written = json.loads(result.stdout)
    assert "proteus_refused" in written["_Z8reshapedv"] and "proteus" in written["_Z5plainv"]
    # An entry an earlier export wrote stays, and the message says so.
    proteus.write_text(json.dumps({"_Z8reshapedv": {"OptLevel": "2"}}))
    result = run(["mneme", "export", str(plain), str(reshaped), "--proteus", str(proteus)],
                 check=False)
    assert result.returncode == 1 and "its earlier entry there is kept" in result.stderr
    assert json.loads(proteus.read_text())["_Z8reshapedv"] == {"OptLevel": "2"}
    # Nothing Proteus can express: its file is not created, nor anything said written.
    alone = tmp_path / "alone.json"
    result = run(["mneme", "export", str(reshaped), "--proteus", str(alone)], check=False)
    assert result.returncode == 1 and "other outputs" not in result.stderr
    assert not alone.exists()
    # The synthetic database's IR is not bitcode: a bundle says so in one line.
    result = run(["mneme", "export", str(plain), "--bundle", str(tmp_path / "bundle"), "-rdb",
                  str(instance.db.path)], check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "the recorded IR is not LLVM bitcode" in result.stderr.splitlines()[-1]


def test_concurrent_exports_into_one_file_keep_every_entry(instance, tmp_path):
    """Eight writers at once, six times over: every kernel's entry survives."""
    import subprocess
    import sys
    import time

    tune(instance, tmp_path, space="quick", trials=6)
    best = json.loads((tmp_path / "study" / "best.json").read_text())
    files = []
    for n in range(8):
        path = tmp_path / f"best{n}.json"
        path.write_text(json.dumps({**best, "kernel": f"_Z6kernel{n}v"}))
        files.append(path)
    # Every writer waits for the start, then merges its entry; a pause between
    # reading the file and writing it back widens the window a lost update needs.
    code = ("import sys, time; from pathlib import Path; import mneme_cc.tune.export as e\n"
            "write = e.write_text_atomic\n"
            "e.write_text_atomic = lambda path, text: (time.sleep(0.02), write(path, text))\n"
            "go = Path(sys.argv[4])\nwhile not go.exists(): time.sleep(0.001)\n"
            "e.export([Path(sys.argv[1])], Path(sys.argv[2]), Path(sys.argv[3]))")
    for round_ in range(6):
        proteus, mneme = tmp_path / f"proteus{round_}.json", tmp_path / f"mneme{round_}.json"
        go = tmp_path / f"go{round_}"
        writers = [subprocess.Popen([sys.executable, "-c", code, str(f), str(proteus), str(mneme),
                                     str(go)], cwd=tmp_path) for f in files]
        time.sleep(0.5)  # the interpreters start
        go.touch()
        assert [w.wait() for w in writers] == [0] * 8
        assert sorted(json.loads(proteus.read_text())) == [f"_Z6kernel{n}v" for n in range(8)]
        assert len(json.loads(mneme.read_text())["kernels"]) == 8
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_malformed_best_json_is_one_line(tmp_path):
    best = tmp_path / "best.json"
    for content in ({"kernel": "_Z1kv", "config": {}},                     # no launch
                    {"kernel": "_Z1kv", "config": {"pipeline": 5}, "launch": {}},
                    {"kernel": 3, "config": {}, "median_ms": 1.0,
                     "launch": {"grid": [1, 1, 1], "block": [1, 1, 1], "shared_mem_bytes": 0}}):
        best.write_text(json.dumps(content))
        result = run(["mneme-export", str(best), "--proteus", str(tmp_path / "p.json")],
                     check=False)
        assert result.returncode == 2 and "not a best.json written by `mneme tune`" in \
            result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize("args, message", [
    (["--sampler", "annealing"], "unknown sampler 'annealing'"),
    (["--objective", "speed"], "unknown objective"),
    (["--trials", "0"], "--trials must be at least 1"),
    (["-rid", "nope"], "no instance in"),
    (["--timeout", "-5"], "--timeout must be a positive number of seconds, not -5.0"),
    (["--trial-timeout", "0"], "--trial-timeout must be a positive number"),
    (["--workers", "-4"], "--workers must be at least 1, not -4"),
    (["--seed", "-1"], "--seed must be at least 0, not -1"),
    (["--askers", "-1"], "--askers must be at least 0, not -1"),
    (["--space", "bogus"], "unknown space 'bogus'"),
    (["--devices", "-1"], "GPU ordinals (0, 1, ...), each once"),
    (["--devices", "0,0"], "GPU ordinals (0, 1, ...), each once"),
])
def test_bad_tune_input(instance, args, message):
    result = run(["mneme", "tune", "-rdb", str(instance.db.path), *args], check=False)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_bad_export_input(tmp_path, instance):
    result = run(["mneme", "export", "-rdb", str(tmp_path), "--proteus", str(tmp_path / "p")],
                 check=False)
    assert result.returncode == 2 and "not a record database" in result.stderr
    result = run(["mneme", "export", "-rdb", str(instance.db.path), "--proteus",
                  str(tmp_path / "p")], check=False)  # a database with no study
    assert result.returncode == 2 and "nothing to export" in result.stderr
    result = run(["mneme-export", str(tmp_path / "best.json")], check=False)
    assert result.returncode == 2 and "--proteus FILE, --mneme FILE" in result.stderr


def test_search_space_base_is_empty_and_categoricals_enumerate(instance):
    assert list(SearchSpace(instance, H100).combinations()) == [{}]
    assert Categorical("x", (1, 2)).values() == [1, 2]


# --- several processes on one study -----------------------------------------

COOPERATE = """
import sys
from mneme_cc.record.db import RecordDB
from mneme_cc.tune.storage import open_storage
from mneme_cc.tune.tuner import Tuner, TuneSettings
from tune_doubles import H100, SlowFakeExecutor
db, storage, study, sampler, trials = sys.argv[1:]
(inst,) = RecordDB(db).instances
settings = TuneSettings(space="standard", sampler=sampler, trials=int(trials), storage=storage,
                        study_name=study, resume=True, compile_workers=2,
                        allow_numerics_change=True)
print(Tuner(inst, settings, props=H100, executor=SlowFakeExecutor).run()["trials"])
"""


def _cooperate(instance, storage: str, study: str, sampler: str, trials: int) -> list[int]:
    """Two processes on one study; the second starts once the first has a result
    (an exhaustive study is queued by then). Returns each one's trial count."""
    import os
    import subprocess
    import sys
    import time

    # From the tests directory, so that mneme_cc is the installed package
    # (with its native module), not the source tree of the working directory.
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": str(here)}
    cmd = [sys.executable, "-c", COOPERATE, str(instance.db.path), storage, study, sampler,
           str(trials)]
    first = subprocess.Popen(cmd, env=env, cwd=here, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    jsonl = instance.db.path / "tune" / study / "trials.jsonl"
    deadline = time.time() + 60
    while not jsonl.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    second = subprocess.Popen(cmd, env=env, cwd=here, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    counts = []
    for process in (first, second):
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        counts.append(int(out.split()[-1]))
    return counts


@pytest.mark.parametrize("sampler", ["random", "exhaustive"])
def test_two_processes_share_one_study_in_postgresql(instance, postgres_url, sampler):
    """No trial lost, none duplicated; exhaustive runs each combination once."""
    trials = 60
    counts = _cooperate(instance, postgres_url, f"shared-{sampler}", sampler, trials)
    assert all(counts) and sum(counts) >= trials, counts  # both took part
    frozen = assert_one_study(postgres_url, f"shared-{sampler}", trials, 2,
                              [instance.db.path / "tune" / f"shared-{sampler}" / "trials.jsonl"])
    if sampler == "exhaustive":
        space = load_space("standard", instance, H100)
        expected = list(itertools.islice(space.combinations(), trials))
        ran = [t.params for t in frozen if "result" in t.user_attrs]
        assert len(ran) == trials and all(p in ran for p in expected)


def test_two_processes_share_the_default_journal(instance):
    storage = str(instance.db.path / "tune" / "journal" / "study.log")
    counts = _cooperate(instance, storage, "journal", "random", 40)
    assert all(counts)
    assert_one_study(open_storage(storage, instance.db.path), "journal", 40, 2,
                     [instance.db.path / "tune" / "journal" / "trials.jsonl"])


def test_a_loop_per_device_shares_one_study_and_one_summary(instance, tmp_path):
    """Two devices: the tuner's loop on the first, a process's on the second,
    one study (none lost, none twice); the summary adds both up, per device
    too, and is the one on disk."""
    from tune_doubles import EmulatedExecutor  # the real one's processes, sleeping

    from mneme_cc.tune.device_loops import live_progress

    settings = TuneSettings(space="standard", sampler="random", trials=80, devices=[0, 1],
                            compile_workers=2, seed=3, out_dir=tmp_path / "s",
                            study_name="s", allow_numerics_change=True)
    seen = []  # the other loop's counts as the live table reads them

    def watch(t, _):
        if t.device_loops:
            seen.append(live_progress(t, t.summary())[1])

    tuner = Tuner(instance, settings, props=H100, executor=EmulatedExecutor, on_trial=watch)
    summary = tuner.run()
    devices = summary["devices"]
    assert [d["device"] for d in devices] == [0, 1] and all(d["trials"] > 5 for d in devices)
    assert summary["trials"] == sum(d["trials"] for d in devices) \
        == sum(summary["outcomes"].values())
    assert summary["outcomes"][oc.VERIFIED] == sum(d["verified"] for d in devices)
    # The live table saw the other loop's trials grow while it ran, up to its
    # summary's, and every loop's once they ended.
    assert seen and {d for d, _, _ in seen} == {1} and seen[-1][1] > 0
    assert all(a[1] <= b[1] and a[2] <= b[2] and b[2] <= b[1] for a, b in zip(seen, seen[1:], strict=False))
    assert seen[-1][1] <= devices[1]["trials"] and seen[-1][2] <= devices[1]["verified"]
    assert live_progress(tuner, summary) == [(d["device"], d["trials"], d["verified"])
                                             for d in devices]
    frozen = assert_one_study(open_storage(None, tmp_path / "s"), "s", 80, 2,
                              [tmp_path / "s" / "trials.jsonl"])
    owners = {t.user_attrs["owner"]["pid"] for t in frozen if "owner" in t.user_attrs}
    assert len(owners) == 2  # two processes made trials
    assert summary["best_median_ms"] == min(t.values[0] for t in frozen if t.values)
    # Both loops time as the study chose once.
    (other,) = tuner.loop_summaries
    assert summary["timed_launches"] == other["summary"]["timed_launches"] == \
        tuner.study.user_attrs["timed_launches"]
    on_disk = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert [(d["device"], d["trials"]) for d in on_disk["devices"]] == \
        [(d["device"], d["trials"]) for d in devices]
    # The other loop had its share of the compile processes and its own seed.
    from mneme_cc.tune.device_loops import settings_for

    other = settings_for(settings, 1, 1, 2)
    assert (other.devices, other.compile_workers, other.seed, other.resume) == ([1], 1, 4, True)


def test_a_device_s_loop_keeps_the_study_s_deadline_and_is_not_for_every_study(instance,
                                                                               tmp_path):
    from tune_doubles import EmulatedExecutor

    from mneme_cc.tune.device_loops import wanted

    settings = TuneSettings(space="standard", sampler="random", trials=10**6, timeout=3,
                            devices=[0, 1], compile_workers=2, out_dir=tmp_path / "s")
    started = time.perf_counter()
    summary = Tuner(instance, settings, props=H100, executor=EmulatedExecutor).run()
    assert time.perf_counter() - started < 3 + 5  # the other loop ended with the study
    assert all(d["trials"] > 0 for d in summary["devices"])
    assert summary["time_spent"]["wall"] < 3 + 5
    assert wanted(settings)
    assert not wanted(dataclasses.replace(settings, objectives=["time", "registers"]))
    assert not wanted(dataclasses.replace(settings, storage="sqlite:///s.db"))
    assert not wanted(dataclasses.replace(settings, loop_per_device=False))
    assert not wanted(dataclasses.replace(settings, devices=[1]))


DEVICES = """
import sys
from pathlib import Path

from tune_doubles import H100, EmulatedExecutor

from mneme_cc.record.db import RecordDB
from mneme_cc.tune.tuner import Tuner, TuneSettings

(inst,) = RecordDB(sys.argv[1]).instances
settings = TuneSettings(space="standard", sampler="random", trials=10**6, devices=[0, 1],
                        compile_workers=2, out_dir=Path(sys.argv[2]), study_name="s")
Tuner(inst, settings, props=H100, executor=EmulatedExecutor).run()
"""


def test_a_device_s_loop_ends_when_the_study_s_tuner_dies(instance, tmp_path):
    """kill -9 of the study's tuner (no deadline, no trial budget in reach):
    the other device's loop is told by the kernel, and ends."""
    import subprocess
    import sys

    import optuna

    here = Path(__file__).parent
    tuner = subprocess.Popen([sys.executable, "-c", DEVICES, str(instance.db.path),
                              str(tmp_path / "s")], env={**os.environ, "PYTHONPATH": str(here)},
                             cwd=here, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    loop, waited = None, time.time() + 120
    try:
        while loop is None and tuner.poll() is None and time.time() < waited:
            time.sleep(0.5)
            try:
                study = optuna.load_study(study_name="s",
                                          storage=open_storage(None, tmp_path / "s"))
            except KeyError:  # not made yet
                continue
            pids = {t.user_attrs.get("owner", {}).get("pid") for t in study.trials}
            loop = next((p for p in pids if p not in (None, tuner.pid)), None)
    finally:
        tuner.kill()
        tuner.wait()
    assert loop is not None, "the other device's loop made no trial"

    def alive(pid: int) -> bool:  # a zombie waits for a parent that is gone
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False

    waited = time.time() + 30
    while alive(loop) and time.time() < waited:
        time.sleep(0.2)
    assert not alive(loop)


def test_with_one_loop_or_a_device_that_fails_the_study_goes_on(instance, tmp_path):
    from tune_doubles import NoSecondGpuExecutor, SlowFakeExecutor

    one = TuneSettings(space="standard", sampler="random", trials=30, devices=[0, 1],
                       compile_workers=2, out_dir=tmp_path / "one", loop_per_device=False)
    summary = Tuner(instance, one, props=H100, executor=SlowFakeExecutor).run()
    assert "devices" not in summary and summary["trials"] >= 30
    failing = dataclasses.replace(one, out_dir=tmp_path / "two", loop_per_device=True)
    summary = Tuner(instance, failing, props=H100, executor=NoSecondGpuExecutor).run()
    assert summary["trials"] >= 30 and summary["devices"][0]["trials"] == summary["trials"]
    assert summary["devices"][1] == {
        "device": 1, "error": "GPU worker on device 1: cuInit failed (CUDA_ERROR_NO_DEVICE)"}


def test_a_study_stopped_stops_every_device_s_loop_with_its_trials_closed(instance, tmp_path):
    """Ctrl-C (here raised in the tuner's own loop) stops the other loops as
    their deadline would: each closes what it had running and answers."""
    import multiprocessing

    import optuna
    from tune_doubles import SlowFakeExecutor

    settings = TuneSettings(space="standard", sampler="random", trials=10**6, devices=[0, 1],
                            compile_workers=2, out_dir=tmp_path / "s", study_name="s")

    interrupted = []

    def interrupt(tuner, _result):  # once (trials pruned unrun are counted between tells)
        if sum(tuner.counts.values()) >= 20 and not interrupted:
            interrupted.append(True)
            raise KeyboardInterrupt

    tuner = Tuner(instance, settings, props=H100, executor=SlowFakeExecutor, on_trial=interrupt)
    with pytest.raises(KeyboardInterrupt):
        tuner.run()
    assert not multiprocessing.active_children()
    (other,) = tuner.loop_summaries
    assert other["device"] == 1 and other["summary"]["trials"] > 0
    study = optuna.load_study(study_name="s", storage=open_storage(None, tmp_path / "s"))
    left = [t.user_attrs["owner"]["pid"] for t in study.get_trials(deepcopy=False)
            if t.state == optuna.trial.TrialState.RUNNING]
    # The stopped loop left none running (this process, interrupted in a tell,
    # may leave the trials that waited on it, as any interrupted tuner).
    assert len(study.trials) > 20 and set(left) <= {os.getpid()}


def test_storage_errors_are_one_line(instance, tmp_path):
    with pytest.raises(UsageError, match="not a storage: give a journal file"):
        open_storage(str(tmp_path / "study.txt"), tmp_path)
    with pytest.raises(UsageError, match=r"--storage postgresql\+psycopg2://nobody@127.0.0.1:9/x: "
                                         r"OperationalError"):
        open_storage("postgresql+psycopg2://nobody@127.0.0.1:9/x", tmp_path)
    import importlib.util

    if importlib.util.find_spec("psycopg") is None:  # SQLAlchemy's default PostgreSQL driver
        with pytest.raises(UsageError, match=r"needs the Python package 'psycopg': "
                                             r"pip install 'psycopg\[binary\]'"):
            open_storage("postgresql://nobody@127.0.0.1:9/x", tmp_path)


# --- reports -----------------------------------------------------------------

def test_report_draws_every_figure_and_a_page(instance, tmp_path):
    studies = instance.db.path / "tune"
    tune(instance, tmp_path, space="standard", trials=40, study_name="one",
         out_dir=studies / "one")
    tune(instance, tmp_path, space="quick", sampler="nsga2", objectives=["time", "registers"],
         trials=12, study_name="two", out_dir=studies / "two")
    out = run(["mneme", "report", "-rdb", str(instance.db.path)])
    written = [Path(line) for line in out.stdout.split()]
    names = {(p.parent.parent.name, p.name) for p in written}
    assert {("one", "history.png"), ("one", "importance.png"), ("one", "distribution.png"),
            ("one", "report.html"), ("two", "pareto.png"), ("two", "report.html")} <= names
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written if p.suffix == ".png")
    page = (studies / "one" / "report" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and "failed_verification" in page
    # The importance plot names the parameters the space searched, by the
    # method it chose (not Optuna's default, which changed in Optuna 5).
    import optuna

    from mneme_cc.tune.report import importance_evaluator
    from mneme_cc.tune.study_dir import StudyDir

    method, _, evaluator = importance_evaluator()
    assert method == "PED-ANOVA"
    assert isinstance(evaluator, optuna.importance.PedAnovaImportanceEvaluator)
    assert set(optuna.importance.get_param_importances(StudyDir(studies / "one").study(),
                                                       evaluator=evaluator)) \
        <= {"pipeline", "specialize_args", "specialize_dims", "launch_bounds",
            "min_blocks_per_sm", "ptxas_opt_level", "max_registers"}


def test_report_errors_are_one_line(instance, tmp_path):
    out = run(["mneme", "report", "-rdb", str(instance.db.path)], check=False)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0
    assert "no tuning studies in" in out.stderr and "run `mneme tune" in out.stderr
    tune(instance, tmp_path, space="quick", trials=4, study_name="one",
         out_dir=instance.db.path / "tune" / "one")
    out = run(["mneme", "report", "-rdb", str(instance.db.path), "--study", "nope"],
              check=False)
    assert out.returncode == 2 and "no study nope in" in out.stderr
    # Damaged lines of trials.jsonl (a writer killed mid-line) are left out, and said.
    from mneme_cc.tune.study_dir import StudyDir

    trials = instance.db.path / "tune" / "one" / "trials.jsonl"
    lines = trials.read_text().splitlines()
    trials.write_text(lines[0][:30] + "\n".join(lines) + "\n{oops\n")
    study = StudyDir(trials.parent)
    assert (len(study.trials), study.damaged_lines) == (len(lines) - 1, 2)
    out = run(["mneme", "report", "-rdb", str(instance.db.path), "--study", "one"])
    assert f"{trials}: 2 damaged line(s) left out" in out.stderr


def test_tuning_without_optuna_says_how_to_get_it(instance, tmp_path):
    hidden = tmp_path / "hidden"
    (hidden / "optuna").mkdir(parents=True)
    (hidden / "optuna" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    out = run(["mneme", "tune", "-rdb", str(instance.db.path), "--trials", "2"],
              env=tool_env(PYTHONPATH=str(hidden)), check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "tuning needs Optuna: pip install 'mneme-cc[tune]'" in out.stderr


def test_every_config_of_the_proteus_preset_exports_to_proteus(instance):
    space = load_space("proteus", instance, H100)
    configs = [space.derive(p) for p in space.combinations()]
    assert len(configs) == 4 * 4 * (1 + 8)  # levels x specialisations x (off, 1..8 per SM)
    for config in configs:
        assert proteus_entry(config, instance.block)["Pipeline"] == config.pipeline


def test_infeasible_configurations_are_known_before_compiling():
    from mneme_cc.tune.feasibility import Need, bounds_budget, infeasible

    block = (256, 1, 1)
    need = Need(registers=80, shared_bytes=16 * 1024)
    ok = ReplayConfig()
    assert infeasible(ok, block, H100, need) is None
    # 256 threads x 2 blocks leave 128 registers; x 8 blocks, 32: a 80-register kernel spills.
    assert bounds_budget(256, 2, H100) == 128 and bounds_budget(256, 8, H100) == 32
    assert infeasible(ReplayConfig(launch_bounds=True, min_blocks_per_sm=2), block, H100,
                      need) is None
    assert "spills heavily" in infeasible(
        ReplayConfig(launch_bounds=True, min_blocks_per_sm=8), block, H100, need)
    # Unknown needs: only what the device forbids outright.
    assert infeasible(ReplayConfig(launch_bounds=True, min_blocks_per_sm=8), block, H100,
                      Need()) is None
    assert "do not fit on one SM" in infeasible(
        ReplayConfig(launch_bounds=True, min_blocks_per_sm=9), block, H100, Need())
    assert "shared memory" in infeasible(
        ReplayConfig(launch_bounds=True, min_blocks_per_sm=5), block, H100,
        Need(registers=80, shared_bytes=48 * 1024))
    assert "exceeds its launch bounds" in infeasible(
        ReplayConfig(launch_bounds=True, max_threads=128), block, H100, need)
    assert "spills heavily" in infeasible(ReplayConfig(max_registers=32), block, H100, need)
    assert infeasible(ReplayConfig(max_registers=64), block, H100, need) is None
    assert "exceed a block's" in infeasible(ReplayConfig(block=(1024, 1, 1)), block, H100,
                                            Need(registers=128))
    assert "exceeds the GPU's" in infeasible(ReplayConfig(block=(2048, 1, 1)), block, H100,
                                             Need())


@pytest.mark.parametrize("deaf", [False, True])
def test_the_deadline_ends_a_study_and_closes_every_trial(instance, tmp_path, deaf):
    import optuna
    from tune_doubles import HangingExecutor

    HangingExecutor.deaf = deaf
    settings = TuneSettings(trials=50, sampler="random", seed=1, compile_workers=2, timeout=1.0,
                            out_dir=tmp_path / "study", allow_numerics_change=True,
                            space="standard")
    tuner = Tuner(instance, settings, props=H100, executor=HangingExecutor)
    started = time.perf_counter()
    summary = tuner.run()
    assert time.perf_counter() - started < 1.0 + 5.0
    states = [t.state for t in tuner.study.get_trials()]
    assert optuna.trial.TrialState.RUNNING not in states and states
    lines = [json.loads(x) for x in (tmp_path / "study" / "trials.jsonl").read_text().splitlines()]
    assert lines and {x["outcome"] for x in lines} == {oc.CANCELLED}
    assert summary["outcomes"][oc.CANCELLED] == len(lines)
    assert summary["time_spent"]["wall"] < 6.0


def test_a_compile_process_past_its_limit_is_killed_and_replaced(instance, tmp_path):
    """The executor's compile processes: a limit too short for any compile kills
    the process; the next ask gets a fresh one, which answers (here LLVM's
    refusal of the synthetic IR); a cancel ends an ask in progress at once."""
    from mneme_cc.tune.workers import Worker

    worker = Worker(str(instance.db.path), instance.name, str(tmp_path / "cache"))
    try:
        job = (ReplayConfig(pipeline="default<O3>").to_json(), "sm_90", False)
        assert worker.ask(job, 0.001) == ("timeout", None)
        assert worker.restarts == 1 and worker.process.is_alive()
        kind, (error, _) = worker.ask(job, 120)
        assert kind == "reply" and "bitcode" in error
        # Asked for a probe's compiles ahead: an answer, whatever the IR.
        kind, (error, seconds) = worker.ask((job[0], "sm_90", True), 120)
        assert kind == "reply" and "probe" not in seconds
        worker.cancel()
        started = time.perf_counter()
        assert worker.ask(job, 120)[0] == "died"
        assert time.perf_counter() - started < 10 and not worker.process.is_alive()
    finally:
        worker.close()


def test_a_compile_process_hands_over_the_kernel_it_built(tmp_path):
    """What a compile process built (vector_add's real IR, LLVM and ptxas here)
    reaches the GPU worker with its answer: the very cubin and resources the
    compile cache holds, so that the worker need not look them up again."""
    import numpy as np
    from synthetic_db import make_database

    from mneme_cc.drivers import read_embedded_modules
    from mneme_cc.record import RecordDB
    from mneme_cc.replay.compiling.compiler import compile_instance
    from mneme_cc.tune.workers import Worker

    examples = Path(__file__).parents[2] / "examples"
    obj = tmp_path / "vector_add.o"
    run(["mneme-cxx", "-O3", "-c", str(examples / "vector_add" / "vector_add.cu"), "-o", str(obj)])
    (module,) = read_embedded_modules(obj)
    a = np.arange(1024, dtype=np.float32)
    make_database(tmp_path / "db", a, a, a + a, bitcode=module.bitcode,
                  kernel=("_Z10vector_addPKfS0_Pfi",
                          "vector_add(float const*, float const*, float*, int)"))
    (inst,) = RecordDB(tmp_path / "db").instances
    config = ReplayConfig(pipeline="default<O2>", max_registers=32)
    worker = Worker(str(tmp_path / "db"), inst.name, str(tmp_path / "cache"))
    try:
        for cached in (False, True):
            kind, (error, seconds, kernel) = worker.ask((config.to_json(), "sm_90", False), 120)
            assert kind == "reply" and not error and kernel["cache_hit"] == cached
            assert ("ptxas" in seconds) != cached
        stored = compile_instance(inst, config, "sm_90", tmp_path / "cache")
        assert stored.cache_hit and kernel["cubin"] == stored.cubin
        assert kernel["resources"] == dataclasses.asdict(stored.resources)
        assert kernel["assembler"] == stored.assembler and kernel["resources"]["registers"] <= 32
        # The application's image is the GPU worker's to load: nothing built, nothing handed over.
        assert worker.ask((ReplayConfig(baseline="original").to_json(), "sm_90", False), 120) \
            == ("reply", ("", {}))
    finally:
        worker.close()


def test_the_auto_space_starts_from_the_build_and_searches_geometry_only_if_it_verifies(
        instance):
    from types import SimpleNamespace

    from mneme_cc.tune.auto import Auto

    space = load_space("auto", instance, H100)
    assert isinstance(space, Auto)
    names = {d.name for d in space.dimensions()}
    assert {"pipeline", "specialize_args", "launch_bounds", "max_registers"} <= names
    assert "block" not in names and "fp_contract" not in names
    first = space.initial_params()
    assert space.derive(first).compile_fields() == ReplayConfig(
        iterations=space.run["iterations"]).compile_fields()
    tried = []
    space.calibrate(lambda c: tried.append(c) or SimpleNamespace(verified=False))
    assert tried and tried[0].block[0] == instance.block[0] // 2
    assert "block" not in {d.name for d in space.dimensions()}
    space.calibrate(lambda c: SimpleNamespace(verified=True))
    assert "block" in {d.name for d in space.dimensions()}
    assert space.derive(space.initial_params()).block == instance.block
    space.changes_numerics = True
    assert "fp_contract" in {d.name for d in space.dimensions()}


def test_the_dataset_holds_every_trial_as_parquet_and_as_t4(instance, tmp_path):
    import pyarrow.parquet as pq

    tune(instance, tmp_path, space="standard", trials=30,
         out_dir=instance.db.path / "tune" / "one")
    db = str(instance.db.path)
    jsonl = instance.db.path / "tune" / "one" / "trials.jsonl"
    lines = [json.loads(x) for x in jsonl.read_text().splitlines()]
    # A failure whose probe waited for its variants' compile: not the configuration's compile.
    lines[0]["stage_seconds"] = {"compile.ptxas": 0.25, "compile.probe": 4.0}
    jsonl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = run(["mneme", "dataset", "-rdb", db, "--out", str(tmp_path / "trials.parquet")])
    assert f"{len(lines)} trial(s)" in out.stdout
    table = pq.read_table(tmp_path / "trials.parquet").to_pylist()
    assert len(table) == len(lines)
    row = next(r for r in table if r["outcome"] == oc.VERIFIED)
    assert row["kernel"] == instance.kernel_name and row["static_hash"] == instance.static_hash
    assert len(row["ir_sha256"]) == 64 and row["block"] == list(instance.block)
    assert json.loads(row["config"])["pipeline"].startswith("default<")
    assert row["samples_ms"] and row["registers"] == 32 and row["device"] == H100.name
    run(["mneme", "dataset", "-rdb", db, "--out", str(tmp_path / "t4.json")])
    t4 = json.loads((tmp_path / "t4.json").read_text())
    assert t4["schema_version"] == "1.0.0"
    fresh = [x for x in lines if not x["duplicate"]]
    assert len(t4["results"]) == len(fresh)
    for result, line in zip(t4["results"], fresh, strict=True):
        assert {"configuration", "times", "invalidity", "correctness"} <= set(result)
        assert result["invalidity"] == {"verified": "correct", "compile_error": "compile",
                                        "failed_verification": "correctness",
                                        "timeout": "timeout", "runtime_error": "runtime"}[
            line["outcome"]]
        assert result["correctness"] == (1 if line["outcome"] == oc.VERIFIED else 0)
        assert result["times"]["runtimes"] == line["samples_ms"]
    assert t4["results"][0]["times"]["compilation_time"] == 0.25
    fifo = tmp_path / "pipe.parquet"
    os.mkfifo(fifo)
    for args, message in (
            (["--out", str(tmp_path / "x.csv")], "say the format with --format"),
            (["--out", str(tmp_path)], "is a directory"),
            (["--out", str(fifo)], "is not a regular file"),
            (["--out", str(tmp_path / "x.json"), "-rdb", str(tmp_path / "none")],
             "no such record database")):
        out = run(["mneme", "dataset", "-rdb", db, *args], check=False)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # left in place


def test_a_worker_that_cannot_be_restarted_answers_died_and_never_raises(tmp_path):
    from tune_doubles import flaky_worker_main

    from mneme_cc.tune.workers import Worker

    class Flaky(Worker):
        target = staticmethod(flaky_worker_main)

    worker = Flaky(str(tmp_path / "started"), "x", None)
    try:
        kind, reply = worker.ask("one", 30, restart_if=lambda r: r["outcome"] == "runtime_error")
        assert kind == "reply" and reply["echo"] == "one"
        assert worker.ask("two", 30)[0] == "died"  # the restart failed: said, not raised
        worker.cancel()
        assert worker.ask("three", 30)[0] == "died"
    finally:
        worker.close()


def test_a_study_says_how_long_its_gpu_workers_and_compile_processes_took_to_start(
        instance, tmp_path):
    """The start before a study's first trial, by kind of process: the
    slowest GPU worker's restore and the slowest compile process's."""
    from tune_doubles import RESTORE_S, EmulatedExecutor, SleepingGpu, restoring_gpu_main

    class Restoring(SleepingGpu):
        target = staticmethod(restoring_gpu_main)

    class Executor(EmulatedExecutor):
        gpu_worker_class = Restoring

    settings = TuneSettings(space="quick", sampler="random", trials=4, compile_workers=2,
                            out_dir=tmp_path / "s")
    spent = Tuner(instance, settings, props=H100, executor=Executor).run()["time_spent"]
    assert RESTORE_S <= spent["startup.gpu"] <= spent["startup"]
    # A compile process's start is a process's spawn, not the GPU's restore.
    assert 0 < spent["startup.compile"] < RESTORE_S


def test_the_first_worker_that_cannot_start_is_said_at_once_and_none_is_waited_for(tmp_path):
    """Workers start together: one that fails is reported while the others
    are still starting, and those are killed, not waited for."""
    from tune_doubles import flaky_worker_main, slow_start_worker_main

    from mneme_cc.errors import MnemeError
    from mneme_cc.tune.workers import Worker, ready_all

    class Slow(Worker):
        target = staticmethod(slow_start_worker_main)

    class Gone(Worker):
        target = staticmethod(flaky_worker_main)

    marker = tmp_path / "started"
    marker.touch()  # the flaky worker's second start: it cannot start
    workers = [Slow("x", "x", None, wait=False), Gone(str(marker), "x", None, wait=False)]
    began = time.monotonic()
    try:
        with pytest.raises(MnemeError, match="the GPU is gone"):
            ready_all(workers)
        assert time.monotonic() - began < 30  # not the slow one's 60 s start
    finally:
        for worker in workers:
            worker.cancel()
            worker.close()
    assert not any(w.process.is_alive() for w in workers)
    assert time.monotonic() - began < 40
    late = Slow("x", "x", None, wait=False, start_timeout=0.5)
    try:
        with pytest.raises(MnemeError, match="did not start within"):
            ready_all([late])
    finally:
        late.cancel()
        late.close()


def test_a_worker_holds_the_next_message_while_it_answers_one():
    from tune_doubles import echo_worker_main

    from mneme_cc.tune.workers import Worker

    class Echo(Worker):
        target = staticmethod(echo_worker_main)

    worker = Echo("x", "x", None)
    try:
        worker.send("one")
        worker.send("two")
        # The second was in the worker's pipe before the first was answered.
        assert worker.receive(30) == ("reply", {"outcome": "verified", "echo": "one",
                                                "next_waiting": True})
        assert worker.receive(30)[1] == {"outcome": "verified", "echo": "two",
                                         "next_waiting": False}
        worker.send("three")
        assert worker.receive(0.01) == ("timeout", None)  # the slow worker is replaced
        assert worker.restarts == 1 and worker.ask("four", 30)[1]["echo"] == "four"
    finally:
        worker.close()


def test_a_replay_that_hangs_is_timed_out_whatever_the_trial_held_behind_it():
    """The next trial (with its kernel's bytes, more than a pipe holds) is
    read by the worker while it replays one: sending it never blocks, so the
    one it replays is still timed out."""
    import threading

    from tune_doubles import busy_worker_main

    from mneme_cc.tune.workers import Worker

    class Busy(Worker):
        target = staticmethod(busy_worker_main)

    worker = Busy("x", "x", None)
    try:
        worker.send("hang")
        sender = threading.Thread(target=worker.send, args=(b"k" * (8 << 20),))
        sender.start()
        sender.join(60)
        assert not sender.is_alive()
        assert worker.receive(0.5) == ("timeout", None) and worker.restarts == 1
        assert worker.ask("next", 30) == ("reply", {"outcome": "verified", "bytes": 4})
    finally:
        worker.cancel()
        worker.close()


def test_a_worker_whose_tuner_is_gone_ends_even_with_an_answer_unread():
    """The tuner's end of the pipe closed (its process killed) while an
    answer waits unread: the worker ends, rather than hold its GPU."""
    from tune_doubles import busy_worker_main

    from mneme_cc.tune.workers import Worker

    class Busy(Worker):
        target = staticmethod(busy_worker_main)

    worker = Busy("x", "x", None)
    try:
        worker.send("answered, never read")
        time.sleep(0.5)
        worker.conn.close()
        worker.process.join(30)
        assert not worker.process.is_alive()
    finally:
        worker.cancel()


def test_damaged_trial_lines_are_left_out_and_counted_everywhere(instance, tmp_path):
    tune(instance, tmp_path, space="quick", trials=6, out_dir=instance.db.path / "tune" / "one")
    trials = instance.db.path / "tune" / "one" / "trials.jsonl"
    good = trials.read_text().splitlines()
    bad = [dict(json.loads(good[0]), stage_seconds=[1]), dict(json.loads(good[0]), outcome=[1]),
           {k: v for k, v in json.loads(good[0]).items() if k != "values"},
           dict(json.loads(good[0]), samples_ms=["x"])]
    trials.write_text("\n".join(good + [json.dumps(b) for b in bad]) + "\n")
    for out in ("t.json", "t.parquet"):
        done = run(["mneme", "dataset", "-rdb", str(instance.db.path), "--out",
                    str(tmp_path / out)])
        assert "3 damaged line(s) left out" in done.stderr
    done = run(["mneme", "report", "-rdb", str(instance.db.path)], check=False)
    assert "Traceback" not in done.stderr


def test_a_failure_the_replay_explains_is_numerics_changing_not_a_miscompile():
    """What a GPU worker reports: failed_verification only for what the replay
    cannot explain as a numerics change."""
    from mneme_cc.replay.judging import contraction_probe as probe
    from mneme_cc.replay.judging.verify import Mismatch
    from mneme_cc.replay.result import ReplayResult
    from mneme_cc.tune.workers import _replay_to_dict

    mismatch = Mismatch("allocation 0x10", 0x10, 3, [0, 1, 2])
    explained = ReplayResult(ReplayConfig(specialize_args=(5,)), False, [mismatch], [0.1], None,
                             numerics=[probe.REASON])
    reply = _replay_to_dict(explained)
    assert reply["outcome"] == oc.NUMERICS_CHANGING
    assert reply["error"] == f"numerics-changing: {probe.REASON}"
    unexplained = ReplayResult(ReplayConfig(), False, [mismatch], [0.1], None)
    assert _replay_to_dict(unexplained)["outcome"] == oc.FAILED_VERIFICATION
    # A GPU worker does not time a failure: no time, and not raced.
    untimed = _replay_to_dict(ReplayResult(ReplayConfig(), False, [mismatch], [], None))
    assert untimed["median_ms"] is None and untimed["samples_ms"] == [] and not untimed["raced"]
    # A pending probe, run on its own later, gives the same verdict and words.
    from types import SimpleNamespace

    from mneme_cc.tune.workers import _probe_to_dict

    for numerics, outcome, error in (([probe.REASON], oc.NUMERICS_CHANGING, reply["error"]),
                                     ([], oc.FAILED_VERIFICATION, "")):
        probed = _probe_to_dict(SimpleNamespace(probe=lambda config, n=numerics: n),
                                ReplayConfig())
        assert (probed["outcome"], probed["error"]) == (outcome, error)
        assert probed["replay_seconds"]["probe"] >= 0


def test_the_loop_says_what_its_own_asks_and_tells_cost(instance, tmp_path):
    """The sampler's side of the pace, beside the compiles and the GPU."""
    _, summary = tune(instance, tmp_path, space="quick", trials=12)
    spent = summary["time_spent"]
    assert 0 < spent["ask"] < spent["wall"] and 0 < spent["tell"] < spent["wall"]
    # The ask's parts (a local step's search, its write, the askers', the
    # sampler's) are within it; the study's writes within the tell.
    parts = {k: v for k, v in spent.items() if k.startswith("ask.")}
    assert parts["ask.sampler"] > 0 and sum(parts.values()) <= spent["ask"]
    # The results' writes: a repeat's while asking, the others' while telling.
    assert 0 < spent["result.write"] <= spent["ask"] + spent["tell"]
    before = spent["startup"] + spent["baselines"] + spent["calibrate"]
    assert 0 < spent["baselines"] and 0 <= spent["calibrate"] and before < spent["wall"]



TOGETHER = """
import sys
from mneme_cc.record.db import RecordDB
from mneme_cc.tune.tuner import Tuner, TuneSettings
from tune_doubles import H100, FakeExecutor
db, storage, trials = sys.argv[1:]
(inst,) = RecordDB(db).instances
settings = TuneSettings(space="quick", sampler="random", trials=int(trials), storage=storage,
                        study_name="together", resume=True, compile_workers=2, askers=0,
                        allow_numerics_change=True)
print(Tuner(inst, settings, props=H100, executor=FakeExecutor).run()["trials"])
"""


def test_processes_started_together_on_a_small_space_keep_the_budget(instance, tmp_path):
    """Late in a small space most asks repeat a configuration or are pruned, and
    such trials never fill the loop: each still counts what the others added."""
    import os
    import subprocess
    import sys

    import optuna

    here = Path(__file__).parent
    storage = str(tmp_path / "together.log")
    cmd = [sys.executable, "-c", TOGETHER, str(instance.db.path), storage, "200"]
    processes = [subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(here)}, cwd=here,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    for process in processes:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    from mneme_cc.tune.storage import open_storage

    study = optuna.load_study(study_name="together", storage=open_storage(storage, tmp_path))
    assert 200 <= len(study.trials) <= 201


class RacingExecutor(FakeExecutor):
    """The fake GPU stage, racing as the real one does: a trial slower than
    `race_above_ms` when it runs keeps 3 of its samples and says so."""

    seen: list[float | None] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.race_above_ms = None

    def submit(self, config):
        future = super().submit(config)
        result = future.result()
        race = self.race_above_ms if config.baseline is None else None
        RacingExecutor.seen.append(race)
        if result.verified and race is not None and result.median_ms > race:
            out = Future()
            out.set_result(dataclasses.replace(result, samples_ms=result.samples_ms[:1] * 3,
                                               raced=True))
            return out
        return future


@pytest.mark.parametrize("race", [True, False])
def test_trials_race_the_best_so_far_unless_told_not_to(instance, tmp_path, race):
    """The loop hands the executor the best's race threshold once it has one
    (never to a baseline), raced trials are counted and marked, and the best
    is never a raced trial; --no-race hands it nothing."""
    from mneme_cc.tune.tuner import race_threshold

    RacingExecutor.seen = []
    settings = TuneSettings(trials=60, sampler="random", seed=3, space="standard",
                            out_dir=tmp_path / "study", race=race)
    tuner = Tuner(instance, settings, props=H100, executor=RacingExecutor)
    summary = tuner.run()
    lines = [json.loads(line) for line in (tmp_path / "study" / "trials.jsonl").open()]
    raced = [t for t in lines if t["raced"]]
    if not race:
        assert summary["raced"] == 0 and not raced and set(RacingExecutor.seen) == {None}
        return
    assert RacingExecutor.seen[0] is None  # the baseline
    thresholds = [s for s in RacingExecutor.seen if s is not None]
    assert thresholds and min(thresholds) == pytest.approx(
        race_threshold(tuner.best.median_ms, tuner.best.samples_ms))
    assert summary["raced"] == len([t for t in raced if not t["duplicate"]]) > 0
    assert all(t["median_ms"] > summary["best_median_ms"] for t in raced)
    # The others, timed in part (the fake's one sample of 20), settled.
    iterations = summary["timed_launches"]["iterations"]
    settled = [t for t in lines if t["settled"]]
    assert iterations > 1 and summary["settled"] == len(
        [t for t in settled if not t["duplicate"]]) > 0
    assert all(t["outcome"] == "verified" and not t["raced"] and
               len(t["samples_ms"]) < iterations for t in settled)


@pytest.mark.parametrize("samples, margin", [
    ([1.0] * 5, 1.02),                  # tight: the least margin
    ([0.99, 1.0, 1.01], 1.06),          # 2% apart: three times that
    ([0.8, 1.0, 1.3], 1.25),            # noisy: the most
    ([], 1.25)])                        # no samples: the most
def test_the_race_threshold_follows_the_best_s_own_spread(samples, margin):
    from mneme_cc.tune.tuner import race_threshold

    assert race_threshold(1.0, samples) == pytest.approx(margin)


def test_the_race_threshold_judges_the_best_by_its_first_launches_too():
    """A raced trial is judged by its first 3 launches: where the best's own
    first 3 ran slower than its median, the fastest of them is the base."""
    from mneme_cc.tune.tuner import race_threshold

    slow_start = [1.01, 1.012, 1.011] + [1.0] * 8
    assert race_threshold(1.0, slow_start) == pytest.approx(1.01 * (1 + 3 * 0.012))
    fast_start = [0.999, 1.0, 1.0] + [1.0] * 8
    assert race_threshold(1.0, fast_start) == pytest.approx(1.02)


def test_a_trial_that_settled_is_not_raced():
    """Fewer samples than launches: raced only when all are slower than the
    time to beat; a trial whose samples settled it is timed, not raced."""
    from mneme_cc.replay.result import ReplayResult
    from mneme_cc.tune.workers import _replay_to_dict

    config = ReplayConfig(iterations=20)

    def raced(samples, race=2.0):
        return _replay_to_dict(ReplayResult(config, True, [], samples, None), race)["raced"]

    assert not raced([1.0] * 5)            # settled: under the threshold
    assert raced([3.0] * 3) and raced([2.5, 3.0, 2.1, 9.0])  # every launch slower
    assert not raced([2.0] * 3)            # at the threshold is not past it
    assert not raced([3.0] * 3, race=None)  # no threshold: nothing raced
    assert not raced([3.0] * 20)           # timed in full


def test_a_local_step_is_never_one_the_study_would_prune(instance, tmp_path):
    """A step that would be pruned (its numerics in a bitwise study, an earlier
    fault) costs writes and gives nothing: local steps pass over it."""
    tuner, _ = tune(instance, tmp_path, space="standard", trials=30, allow_numerics_change=False)
    ran = [t.params for t in tuner.study.get_trials() if t.state.name == "COMPLETE"]
    assert ran and not any(tuner._untried(p) for p in ran)  # run already
    fresh = next(p for p in ({**ran[0], "pipeline": pipeline, "ptxas_opt_level": level}
                             for pipeline in ("default<O1>", "default<O2>", "default<O3>")
                             for level in (0, 1, 2, 3))
                 if tuner._untried(p))
    assert not tuner._untried({**fresh, "pipeline": "default<O0>"})  # numerics-changing
    tuner.faulting.reason = lambda config: "faulted earlier"  # as after a fault
    assert not tuner._untried(fresh)


def test_the_judge_memo_tells_apart_what_derives_apart():
    """Sampled values that compare equal but are of another type, and values
    that cannot be hashed, each get their own memo entry."""
    from mneme_cc.tune.tuner import _memo_key

    keys = {_memo_key({"a": v, "b": "x"}) for v in (1, 1.0, True)}
    assert len(keys) == 3
    assert _memo_key({"b": "x", "a": 1}) == _memo_key({"a": 1, "b": "x"})
    assert _memo_key({"a": [1, 2]}) == _memo_key({"a": [1, 2]}) != _memo_key({"a": [1, 3]})
    nested = {_memo_key({"a": (v, 2)}) for v in (1, 1.0, True)}  # a user space's tuples
    assert len(nested) == 3
