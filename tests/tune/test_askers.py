"""Asker processes: the sampler's asks beside the tuning loop, on the study's
own storage, every trial they make told once or closed."""

from __future__ import annotations

import json
import time

import optuna
import pytest
from tune_doubles import H100, FakeExecutor, HangingExecutor, SlowFakeExecutor, assert_one_study

from mneme_cc.errors import UsageError
from mneme_cc.replay import outcome as oc
from mneme_cc.tune import askers
from mneme_cc.tune.tuner import Tuner, TuneSettings


def study(instance, tmp_path, executor=FakeExecutor, **settings):
    defaults = {"trials": 80, "sampler": "tpe", "seed": 1, "compile_workers": 2, "askers": 2,
                "out_dir": tmp_path / "study", "allow_numerics_change": True,
                "space": "standard"}
    return Tuner(instance, TuneSettings(**{**defaults, **settings}), props=H100,
                 executor=executor)


def test_askers_make_trials_the_loop_tells_once(instance, tmp_path):
    """50 ms a trial: the askers (a second or so to start) find trials to make."""
    tuner = study(instance, tmp_path, executor=SlowFakeExecutor)
    summary = tuner.run()
    assert summary["askers"]["processes"] == 2 and summary["askers"]["stopped"] is None
    assert summary["askers"]["trials"] > 0  # the askers' trials, beside the loop's own
    assert all(p.poll() is not None for p in tuner.askers.processes)
    frozen = assert_one_study(tuner.storage, tuner.name, 80, 1,
                              [tmp_path / "study" / "trials.jsonl"])
    # What an asker made carries the loop's owner: a later start reclaims it.
    assert all(t.user_attrs["owner"] == tuner.owner for t in frozen)


def test_the_deadline_closes_the_askers_trials_too(instance, tmp_path):
    HangingExecutor.deaf = False
    tuner = study(instance, tmp_path, executor=HangingExecutor, trials=500, timeout=1.5,
                  sampler="random")
    started = time.perf_counter()
    summary = tuner.run()
    assert time.perf_counter() - started < 1.5 + 6.0
    states = [t.state for t in tuner.study.get_trials()]
    assert optuna.trial.TrialState.RUNNING not in states
    lines = [json.loads(x) for x in (tmp_path / "study" / "trials.jsonl").read_text().splitlines()]
    assert {x["outcome"] for x in lines} == {oc.CANCELLED}
    # Made by an asker, never taken: cancelled, so a later run counts them out.
    closed = [t for t in tuner.study.get_trials() if t.user_attrs.get("cancelled")]
    assert len(closed) >= len(lines) and summary["askers"]["stopped"] is None


def test_an_asker_that_cannot_open_the_study_leaves_the_loop_asking(instance, tmp_path,
                                                                     capfd):
    tuner = study(instance, tmp_path, trials=30, sampler="random")
    spec = askers.AskerSpec(None, tmp_path / "study", "no-such-study", "random", 1, None,
                            tuple(tuner.space.dimensions()), tuner.owner)
    pool = askers.Askers(1, spec, tuner.study, tuner.storage, tuner.study_id)
    pool.ask_ahead(5)
    pool.ready().result(timeout=60)
    assert pool.broken.startswith("asker 0 stopped (KeyError") and pool.take() is None
    assert not pool.delivering
    pool.close()
    err = capfd.readouterr().err.strip().splitlines()
    assert err[-1].startswith("mneme tune: asker 0 stopped (KeyError") and \
        err[-1].endswith("; the loop asks by itself")


@pytest.mark.parametrize("cpus, count", [(2, 0), (4, 0), (8, 1), (16, 2), (128, 2)])
def test_a_small_machine_keeps_its_processors_for_the_compiles(cpus, count):
    assert askers.automatic_count(cpus) == count


@pytest.mark.parametrize("cpus, gpus, count", [(16, 2, 3), (32, 2, 4), (64, 4, 8), (64, 8, 15)])
def test_each_gpu_gets_two_askers_where_the_processors_allow(cpus, gpus, count):
    assert askers.automatic_count(cpus, gpus) == count


class LaterExecutor(FakeExecutor):
    """Results come 20 ms after submission, from another thread, as a GPU's do."""

    def submit(self, config):
        import threading
        from concurrent.futures import Future

        done = super().submit(config).result()
        future = Future()
        threading.Timer(0.02, future.set_result, (done,)).start()
        return future


def test_a_full_loop_waits_for_its_trials_rather_than_spin(instance, tmp_path):
    """With every slot in flight, a trial an asker made does not wake the loop:
    it asks the storage a few times a trial, not thousands."""
    tuner = study(instance, tmp_path, executor=LaterExecutor, trials=60, sampler="random",
                  compile_workers=1)
    calls = 0
    room = tuner._room

    def counted(trials):
        nonlocal calls
        calls += 1
        return room(trials)

    tuner._room = counted
    summary = tuner.run()
    assert summary["trials"] >= 60 and calls < 20 * 60, calls


def test_askers_whose_trials_all_repeat_do_not_end_the_study(instance, tmp_path):
    """In a space of one configuration every trial after the first repeats
    it and is told at once: once the loop has taken all the askers made,
    nothing is in flight and nothing is asked for, and that is not the end of
    a study with trials left."""
    path = tmp_path / "one.py"
    path.write_text(
        "from mneme_cc.tune.space import SearchSpace, Categorical\n"
        "class One(SearchSpace):\n"
        "    def dimensions(self):\n"
        "        return [Categorical('unroll', ('off',))]\n"
        "    def fields(self, params):\n"
        "        return {}\n")
    tuner = study(instance, tmp_path, trials=3000, askers=1, timeout=60, space=f"{path}:One")
    summary = tuner.run()
    assert summary["trials"] == 3000 and summary["askers"]["trials"] > 0
    assert summary["outcomes"] == {oc.VERIFIED: 3000}


def test_closing_the_askers_closes_what_they_left_running(instance, tmp_path):
    """A trial of this loop's still RUNNING when the askers stop (an asker
    killed mid-ask) is closed as cancelled; another process's is not."""
    tuner = study(instance, tmp_path, trials=30, sampler="random")
    spec = askers.AskerSpec(None, tmp_path / "study", tuner.name, "random", 1, None,
                            tuple(tuner.space.dimensions()), tuner.owner)
    pool = askers.Askers(1, spec, tuner.study, tuner.storage, tuner.study_id)
    left, other = tuner.study.ask(), tuner.study.ask()
    left.set_user_attr("owner", tuner.owner)
    other.set_user_attr("owner", {**tuner.owner, "pid": -1})
    pool.close()
    states = {t.number: (t.state.name, t.user_attrs.get("cancelled")) for t in
              tuner.study.get_trials()}
    assert states == {left.number: ("FAIL", True), other.number: ("RUNNING", None)}


def test_sqlite_gets_no_askers_unless_asked(instance, tmp_path, monkeypatch):
    monkeypatch.setattr(askers, "automatic_count", lambda cpus=None, gpus=1: 2)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    assert askers.start(study(instance, tmp_path, storage=url, askers=None)) is None
    pool = askers.start(study(instance, tmp_path, storage=url, askers=1, study_name="two"))
    assert pool is not None and len(pool.processes) == 1
    pool.close()


def test_a_storage_that_cannot_be_opened_leaves_no_study_directory(instance, tmp_path):
    with pytest.raises(UsageError, match="--storage bogus://x: "):
        study(instance, tmp_path, storage="bogus://x")
    assert not (tmp_path / "study").exists()
