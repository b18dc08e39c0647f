"""Local steps from the best configurations, and how many launches a trial times."""

from __future__ import annotations

import dataclasses
import random

import optuna
import pytest
from tune_doubles import H100

from mneme_cc.tune.neighbours import ATTEMPTS, WARM_UP, LocalSteps, neighbour
from mneme_cc.tune.presets import load_space
from mneme_cc.tune.space import Categorical, Int, Real, SearchSpace


class Conditional(SearchSpace):
    def dimensions(self):
        return [Categorical("bounds", (False, True)),
                Int("blocks", 1, 8, when=("bounds", (True,))),
                Real("fraction", 0.0, 1.0), Int("unroll", 0, 16, step=4)]


def test_a_neighbour_moves_one_parameter_and_its_dependents_follow(instance):
    space, rng = Conditional(instance, H100), random.Random(3)
    start = {"bounds": False, "fraction": 0.5, "unroll": 8}
    for _ in range(200):
        step = neighbour(space, start, rng)
        moved = {k for k in start if step.get(k) != start[k]}
        assert len(moved) == 1, (start, step)
        if step["bounds"]:  # the parameter that now exists has a value in range
            assert 1 <= step["blocks"] <= 8
        else:
            assert "blocks" not in step
        assert 0.0 <= step["fraction"] <= 1.0 and step["unroll"] in (0, 4, 8, 12, 16)
    on = {"bounds": True, "blocks": 8, "fraction": 0.5, "unroll": 16}
    steps = [neighbour(space, on, rng) for _ in range(200)]
    assert all(step != on for step in steps)
    # An integer moves by a step or two; switching its condition off drops it.
    assert {step.get("blocks") for step in steps} == {None, 6, 7, 8}


def test_every_neighbour_of_a_builtin_space_derives_a_config(instance):
    for name in ("standard", "auto"):
        space, rng = load_space(name, instance, H100), random.Random(1)
        params = space.sample(optuna.create_study(sampler=optuna.samplers.RandomSampler(1)).ask())
        for _ in range(50):
            params = neighbour(space, params, rng)
            space.derive(params)  # raises on a value the space cannot ground


class Typed(SearchSpace):
    def dimensions(self):
        return [Categorical("a", (1, 2)), Categorical("b", (1.0, 2.0)),
                Categorical("c", (True, False)), Int("blocks", 1, 8, when=("a", (2,))),
                Real("fraction", 1e-3, 1.0, log=True), Int("unroll", 0, 16, step=4)]


def test_a_step_s_distributions_are_what_sampling_it_would_ask(instance):
    """Built once per dimension, the distributions a local step's trial is
    written with equal those a FixedTrial records sampling the same values."""
    spaces = [load_space(name, instance, H100) for name in ("standard", "auto", "grid-stride")]
    for space in [*spaces, Typed(instance, H100), Conditional(instance, H100)]:
        rng = random.Random(2)
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(2))
        for _ in range(60):
            params = neighbour(space, space.sample(study.ask()), rng)
            fixed = optuna.trial.FixedTrial(params)
            space.sample(fixed)
            assert space.distributions(params) == fixed.distributions, (space, params)
    typed = Typed(instance, H100).distributions({"a": 1, "b": 1.0, "c": True,
                                                 "fraction": 0.5, "unroll": 4})
    # Equal choices of other types stay apart.
    assert [typed[n].choices for n in "abc"] == [(1, 2), (1.0, 2.0), (True, False)]
    assert [type(typed[n].choices[0]) for n in "abc"] == [int, float, bool]
    with pytest.raises(ValueError, match="blocks"):
        Typed(instance, H100).distributions({"a": 2, "b": 1.0, "c": True, "fraction": 0.5,
                                             "unroll": 4})

    class Shapes(SearchSpace):  # choices JSON cannot tell apart
        choices: tuple = ()

        def dimensions(self):
            return [Categorical("shape", self.choices)]

    tuples, lists = Shapes(instance, H100), Shapes(instance, H100)
    tuples.choices, lists.choices = ((1, 2), (3, 4)), ([1, 2], [3, 4])
    with pytest.warns(UserWarning):  # Optuna's, for choices other than scalars
        assert tuples.distributions({"shape": (1, 2)})["shape"].choices == ((1, 2), (3, 4))
        assert type(lists.distributions({"shape": [1, 2]})["shape"].choices[0]) is list


def test_local_steps_start_after_the_warm_up_and_leave_asks_to_the_sampler(instance):
    steps = LocalSteps(Conditional(instance, H100), seed=5)
    steps.found(1.0, {"bounds": False, "fraction": 0.5, "unroll": 8})
    assert steps.propose(WARM_UP - 1, lambda p: True) is None
    proposed = [steps.propose(1000, lambda p: True) for _ in range(1000)]
    local = sum(p is not None for p in proposed)
    assert 850 < local < 950  # the sampler keeps 10% at 1000 verified trials
    assert steps.propose(1000, lambda p: False) is None  # everything nearby already ran
    for value in (3.0, 0.5, 2.0, 0.1, 4.0, 0.7):
        steps.found(value, {"bounds": False, "fraction": value / 4, "unroll": 0})
    assert [v for v, _ in steps.best] == [0.1, 0.5, 0.7, 1.0, 2.0]


class Wide(SearchSpace):
    def dimensions(self):
        return [Categorical(name, tuple(range(12))) for name in "abcd"]


def test_a_step_takes_every_one_parameter_step_left_before_it_moves_two(instance):
    steps = LocalSteps(Wide(instance, H100), seed=7)
    start = {n: 0 for n in "abcd"}
    steps.found(1.0, start)
    left = [{**start, "b": 5}, {**start, "d": 11}, {**start, "a": 3}]  # of 44 such steps
    ran: list[dict] = []
    asked: list[dict] = []

    def moved(params, since=start) -> int:
        return sum(params[n] != since[n] for n in since)

    def untried(params):
        asked.append(params)
        return params not in ran and (params in left or moved(params) >= 2)

    def step() -> dict:  # the sampler's share passed over
        while (made := steps.propose(1000, untried)) is None:
            pass
        ran.append(made)
        return made

    taken = [step() for _ in left]
    assert sorted(taken, key=str) == sorted(left, key=str)  # each, before any two
    asked.clear()
    assert moved(step()) == 2 and len(asked) < ATTEMPTS  # then no one-parameter draw
    # Other incumbents: their one-parameter steps are drawn again, at once.
    better = {n: 6 for n in "abcd"}
    steps.found(0.5, better)
    asked.clear()
    assert moved(step(), better) == 1 and len(asked) <= ATTEMPTS


def test_a_long_kernel_gets_fewer_timed_launches_unless_the_user_chose():
    from mneme_cc.tune.settings import TuneSettings, timed_launches

    assert timed_launches(TuneSettings(), None) == (20, 1)
    assert timed_launches(TuneSettings(), 0.01) == (20, 1)
    assert timed_launches(TuneSettings(), 0.5) == (10, 1)
    assert timed_launches(TuneSettings(), 3.4) == (5, 1)
    assert timed_launches(TuneSettings(iterations=30, warmup=0), 3.4) == (30, 0)


def test_a_geometry_that_faulted_is_not_run_again():
    from mneme_cc.replay import outcome as oc
    from mneme_cc.replay.config import ReplayConfig
    from mneme_cc.tune.feasibility import FaultingGeometries

    seen = FaultingGeometries((16, 1, 1), (256, 1, 1))
    fault = "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access\nmore"
    recorded = ReplayConfig(grid=(16, 1, 1), block=(256, 1, 1))
    seen.note(recorded, oc.RUNTIME_ERROR, fault)  # the recorded geometry is never ruled out
    seen.note(ReplayConfig(), oc.RUNTIME_ERROR, fault)
    seen.note(ReplayConfig(block=(128, 1, 1)), oc.FAILED_VERIFICATION, "differs")
    seen.note(ReplayConfig(block=(64, 1, 1)), oc.RUNTIME_ERROR, "the replay worker died (-9)")
    for config in (recorded, ReplayConfig(), ReplayConfig(block=(128, 1, 1)),
                   ReplayConfig(block=(64, 1, 1))):
        assert seen.reason(config) is None
    seen.note(ReplayConfig(block=(512, 1, 1)), oc.RUNTIME_ERROR, fault)
    reason = seen.reason(ReplayConfig(grid=(16, 1, 1), block=(512, 1, 1), pipeline="default<O1>"))
    assert "faulted earlier" in reason and "ILLEGAL_ADDRESS" in reason and "\n" not in reason
    # One compile setting's fault at a larger block says nothing about others.
    assert seen.reason(ReplayConfig(block=(1024, 1, 1))) is None
    # A second compile setting faulting above the recorded block: blocks as
    # large as the smallest at which both faulted (512) are not run.
    seen.note(ReplayConfig(block=(384, 1, 1), pipeline="default<O1>"), oc.RUNTIME_ERROR, fault)
    reason = seen.reason(ReplayConfig(block=(1024, 1, 1)))
    assert "blocks of 512 threads or more faulted" in reason and "larger blocks" in reason
    assert seen.reason(ReplayConfig(grid=(8, 1, 1), block=(512, 1, 1), pipeline="default<O2>"))
    assert seen.reason(ReplayConfig(block=(480, 1, 1))) is None

    assert seen.reason(ReplayConfig(block=(384, 1, 1), pipeline="default<O1>"))  # its own geometry
    # A probe's run lost the context: not the trial's geometry's doing.
    seen.note(ReplayConfig(block=(288, 1, 1)), oc.RUNTIME_ERROR, oc.PROBE_FAULT + fault)
    assert seen.reason(ReplayConfig(block=(288, 1, 1))) is None
    # Below the recorded block, a fault rules out its own geometry only.
    seen.note(ReplayConfig(block=(96, 1, 1)), oc.RUNTIME_ERROR, fault)
    assert seen.reason(ReplayConfig(block=(96, 1, 1)))
    assert seen.reason(ReplayConfig(block=(64, 1, 1))) is None


def test_a_queued_trial_whose_geometry_faulted_meanwhile_never_reaches_the_gpu():
    """The GPU worker holds the next trial while it replays one. When the one
    it replays faults, the worker is replaced and what it held is sent again,
    checked against what the fault ruled out: a trial of that geometry ends
    infeasible without the restart it would have cost; the rest run in order."""
    import queue
    import threading
    import time
    from concurrent.futures import Future

    from mneme_cc.replay import outcome as oc
    from mneme_cc.replay.config import ReplayConfig
    from mneme_cc.tune.executor import CompileAhead, ReadyTrial, ReplayExecutor
    from mneme_cc.tune.feasibility import FaultingGeometries

    wide = ReplayConfig(grid=(4, 1, 1), block=(1024, 1, 1))

    class Worker:  # the GPU worker's pipe: what it held, what it ran
        arch = "sm_90"

        def __init__(self):
            self.held, self.ran, self.restarts, self.most_held = [], [], 0, 0

        def send(self, message):
            self.held.append(message)
            self.most_held = max(self.most_held, len(self.held))

        def receive(self, timeout, restart_if=None):
            message = self.held.pop(0)
            self.ran.append(ReplayConfig.from_json(message[0]))
            faults = self.ran[-1] == wide
            reply = {"outcome": oc.RUNTIME_ERROR, "error": "CUDA_ERROR_ILLEGAL_ADDRESS"} \
                if faults else {"outcome": oc.VERIFIED, "median_ms": 1.0, "samples_ms": [1.0]}
            if restart_if(reply):  # a new process: what the old one held is gone
                self.restarts += 1
                self.held.clear()
            return "reply", reply

    seen = FaultingGeometries((16, 1, 1), (256, 1, 1))
    executor = object.__new__(ReplayExecutor)  # its GPU stage alone, no processes
    executor.ahead = CompileAhead(1)
    executor._cancelled, executor._current, executor._gpu_queue = threading.Event(), {}, queue.Queue()
    executor.race_above_ms, executor.faults, executor.trial_timeout = None, seen, 30.0
    worker = Worker()
    executor.workers, executor.arch = [worker], "sm_90"
    configs = [wide, dataclasses.replace(wide, pipeline="default<O1>"),
               dataclasses.replace(wide, baseline="ir"), ReplayConfig(block=(128, 1, 1))]
    futures = [Future() for _ in configs]
    now = time.perf_counter()
    for config, future in zip(configs, futures, strict=True):
        executor._gpu_queue.put(ReadyTrial(config, {"ptxas": 0.1}, None, now, now, future))
    executor._gpu_queue.put(None)
    # The executor notes the fault before it sends again what the worker held.
    executor._serve(worker)

    results = [f.result(timeout=0) for f in futures]
    assert [r.outcome for r in results] == [oc.RUNTIME_ERROR, oc.INFEASIBLE, oc.VERIFIED,
                                            oc.VERIFIED]
    assert "faulted earlier" in results[1].error and results[1].compile_seconds == {"ptxas": 0.1}
    # Baselines and other geometries still run, in the order they came.
    assert worker.ran == [configs[0], configs[2], configs[3]] and worker.restarts == 1
    assert worker.most_held == 2 and not executor._current


def test_a_failure_s_probe_is_compiled_by_a_compile_process_then_run_alone():
    """A GPU worker leaves a probe whose variants are not compiled pending:
    the trial waits while a compile process compiles them (ahead of the
    trials waiting for one), then the probe alone runs on the GPU and
    decides the outcome; the trials behind it run meanwhile."""
    import threading

    from mneme_cc.replay import outcome as oc
    from mneme_cc.replay.config import ReplayConfig
    from mneme_cc.tune.executor import CompileAhead, CompileJob, ProbeJob, ReplayExecutor, _Jobs

    explained, miscompiled, fine = (ReplayConfig(pipeline=f"default<O{n}>") for n in (1, 2, 3))
    compiled: list = []

    class Compiler:  # a compile process: what it was asked to compile, in order
        def ask(self, message, timeout, restart_if=None):
            config, _, probe_variants = message
            compiled.append((ReplayConfig.from_json(config), probe_variants))
            if probe_variants:
                return "reply", ("", {"probe": 0.5})
            return "reply", ("", {"ptxas": 0.1}, {"cubin": b"", "resources": {}})

    class Gpu:  # a GPU worker: what it ran, in order
        arch = "sm_90"

        def __init__(self):
            self.held, self.ran, self.restarts = [], [], 0

        def send(self, message):
            self.held.append(message)

        def receive(self, timeout, restart_if=None):
            config_json, _, _, probe_only = self.held.pop(0)
            config = ReplayConfig.from_json(config_json)
            self.ran.append((config, probe_only))
            if probe_only:
                return "reply", {"outcome": oc.NUMERICS_CHANGING if config == explained
                                 else oc.FAILED_VERIFICATION, "replay_seconds": {"probe": 0.01},
                                 "error": "numerics-changing: fuses" if config == explained else ""}
            if config == fine:
                return "reply", {"outcome": oc.VERIFIED, "median_ms": 1.0, "samples_ms": [1.0],
                                 "probe_pending": False}
            return "reply", {"outcome": oc.FAILED_VERIFICATION, "probe_pending": True,
                             "error": "keeps the build's numerics", "replay_seconds": {"launch": 0.1},
                             "mismatches": [{"buffer": "allocation 0x10", "count": 3}]}

    executor = object.__new__(ReplayExecutor)  # its queues and threads alone, no processes
    executor._cancelled, executor._current = threading.Event(), {}
    executor._compile_queue, executor._gpu_queue = _Jobs(), _Jobs()
    executor.race_above_ms, executor.faults, executor.arch = None, None, "sm_90"
    executor.trial_timeout = executor.compile_timeout = 30.0
    executor.ahead, executor.workers = CompileAhead(1), [None]
    gpu = Gpu()
    threads = [threading.Thread(target=executor._compile, args=(Compiler(),)),
               threading.Thread(target=executor._serve, args=(gpu,))]
    for thread in threads:
        thread.start()
    futures = [executor.submit(c) for c in (explained, miscompiled, fine)]
    results = [f.result(timeout=30) for f in futures]
    executor._compile_queue.put(None)
    executor._gpu_queue.put(None)
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive()

    assert [r.outcome for r in results] == [oc.NUMERICS_CHANGING, oc.FAILED_VERIFICATION,
                                            oc.VERIFIED]
    first, second = results[:2]
    assert first.error == "numerics-changing: fuses" and first.mismatches
    assert first.replay_seconds == {"launch": 0.1, "probe": 0.01}
    assert first.compile_seconds["ptxas"] == 0.1 and first.compile_seconds["probe"] > 0
    assert second.error == "allocation 0x10: 3 byte(s) differ"  # a miscompile to bisect
    # Each failure's variants compiled once, then its probe run alone; nothing twice.
    assert sorted((c.pipeline, v) for c, v in compiled if v) == \
        [("default<O1>", True), ("default<O2>", True)]
    assert sorted((c.pipeline, p) for c, p in gpu.ran) == [
        ("default<O1>", False), ("default<O1>", True), ("default<O2>", False),
        ("default<O2>", True), ("default<O3>", False)]
    # Compiled for the trial that waited on it: its own stage, not the executor's ahead count.
    assert executor.ahead.explains and executor.ahead.seconds == 0 and not executor._current
    # The GPU's time an item, from the answers that timed something; a
    # pending probe's compile is an estimate of what compiling ahead costs.
    assert 0.01 <= executor.ahead.gpu_each <= 0.1 and executor.ahead.compile_each is not None
    # A probe goes before the trials waiting in either queue: its trial ran already.
    jobs = _Jobs()
    jobs.put(CompileJob(fine, 0.0, None))
    jobs.put(ProbeJob(explained, {}, {}, 0.0, None, 0.0))
    jobs.put(ProbeJob(miscompiled, {}, {}, 0.0, None, 0.0))
    assert [jobs.get()[0] for _ in range(3)] == [explained, miscompiled, fine]


def test_a_probe_is_compiled_ahead_only_while_the_gpus_queue_outlasts_that_compile():
    """Compiling ahead doubles a trial's compiles: only once the probe has
    explained a failure, and while the trials waiting for the GPUs would
    keep them busy for as long as the compile takes."""
    import threading

    from mneme_cc.replay.config import ReplayConfig
    from mneme_cc.tune.executor import CompileAhead, ReplayExecutor, _Jobs

    ahead = CompileAhead(gpus=2)
    ahead.gpu_ran(0.25)
    assert not ahead.wanted(1000, 0.5)  # no failure explained yet
    ahead.explains = True
    # 4 items over 2 GPUs at 0.25 s keep them busy 0.5 s, as long as the
    # trial's own compile, which stands for the probe's until one is timed.
    assert ahead.wanted(4, 0.5) and not ahead.wanted(3, 0.5)
    ahead.compiled(1.0, timed=True, ahead=True)  # a probe's compile: it stands from now on
    assert not ahead.wanted(4, 0.5) and ahead.wanted(8, 0.5)
    ahead.compiled(2.0, timed=True, ahead=False)  # a pending probe's: the estimate, not the count
    assert ahead.seconds == 1.0 and ahead.compile_each == pytest.approx(1.2)
    ahead.compiled(120.0, timed=False, ahead=True)  # timed out: counted, not an estimate
    assert ahead.seconds == 121.0 and ahead.compile_each == pytest.approx(1.2)
    ahead.gpu_ran(1.25)  # the GPU's time an item follows what the workers answer
    assert ahead.gpu_each == pytest.approx(0.45)

    # The executor asks for a compile ahead after a trial's compile only
    # with that much queued for its GPU.
    asked: list[bool] = []

    class Compiler:
        def ask(self, message, timeout, restart_if=None):
            asked.append(message[2])
            if message[2]:
                return "timeout", None  # a compile ahead that never answers
            return "reply", ("", {"ptxas": 0.1}, {"cubin": b"", "resources": {}})

    executor = object.__new__(ReplayExecutor)  # its compile stage alone, no processes
    executor._cancelled, executor._current = threading.Event(), {}
    executor._compile_queue, executor._gpu_queue = _Jobs(), _Jobs()
    executor.arch, executor.compile_timeout = "sm_90", 30.0
    executor.ahead, executor.workers = CompileAhead(1), [None]
    executor.ahead.explains, executor.ahead.compile_each = True, 1.0
    executor.ahead.gpu_ran(0.25)
    config = ReplayConfig(pipeline="default<O1>")
    for queued, ahead_asked in ((2, False), (3, True)):  # then 3 and 4 waiting with the trial
        asked.clear()
        while executor._gpu_queue.qsize() < queued:
            executor._gpu_queue.put(None)
        executor._compile_one(Compiler(), config, 0.0, None)
        assert asked == [False, True] if ahead_asked else asked == [False]
    assert executor.ahead.compile_each == 1.0 and executor.ahead.seconds > 0


def test_a_trial_s_kernel_goes_to_gpus_of_its_architecture_and_its_wait_ends_as_it_starts():
    import threading
    import time
    from concurrent.futures import Future

    from mneme_cc.replay.config import ReplayConfig
    from mneme_cc.tune.executor import CompileAhead, ReadyTrial, ReplayExecutor

    class Worker:
        def __init__(self, arch):
            self.arch, self.sent = arch, []

        def send(self, message):
            self.sent.append(message)

    executor = object.__new__(ReplayExecutor)  # its GPU stage alone, no processes
    executor.ahead = CompileAhead(1)
    executor._cancelled, executor._current, executor.faults = threading.Event(), {}, None
    executor.race_above_ms, executor.arch = 2.5, "sm_90"
    kernel = {"cubin": b"\x7fELF", "resources": {}}
    compiled_at = time.perf_counter() - 1.0
    same, other = Worker("sm_90"), Worker("sm_100")
    for worker in (same, other):
        item = ReadyTrial(ReplayConfig(), {"ptxas": 0.1}, kernel, compiled_at - 1.0, compiled_at,
                          Future())
        stages = executor._send_trial(worker, item)
        assert stages["compile_seconds"] == {"ptxas": 0.1} and stages["queue_seconds"] >= 1.0
        time.sleep(0.01)
        executor._starts(item, stages)  # held until now
        assert stages["queue_seconds"] >= 1.01
    # Built for sm_90: a GPU of another architecture compiles its own.
    assert same.sent[0][2] is kernel and other.sent[0][2] is None
    assert same.sent[0][1] == 2.5 and not same.sent[0][3]  # raced, not a probe


def test_a_probe_that_cannot_judge_leaves_the_failure_and_one_that_faults_ends_it():
    from mneme_cc.replay import outcome as oc
    from mneme_cc.tune.executor import _probed

    failed = {"outcome": oc.FAILED_VERIFICATION, "error": "keeps the build's numerics",
              "mismatches": [{"buffer": "b", "count": 1}], "replay_seconds": {"launch": 0.1}}
    judged = _probed(failed, {"outcome": oc.NUMERICS_CHANGING, "error": "numerics-changing: x",
                              "replay_seconds": {"probe": 0.2}})
    assert judged["outcome"] == oc.NUMERICS_CHANGING and judged["error"] == "numerics-changing: x"
    assert judged["mismatches"] and judged["replay_seconds"] == {"launch": 0.1, "probe": 0.2}
    refused = _probed(failed, {"outcome": oc.COMPILE_ERROR, "error": "LLVM refused it"})
    assert {k: refused[k] for k in ("outcome", "error")} == \
        {"outcome": oc.FAILED_VERIFICATION, "error": "keeps the build's numerics"}
    fault = {"outcome": oc.RUNTIME_ERROR, "error": oc.PROBE_FAULT + "CUDA_ERROR_ILLEGAL_ADDRESS"}
    assert _probed(failed, fault) == fault


def test_every_process_on_a_study_times_as_its_first_did():
    from mneme_cc.tune.settings import TuneSettings, study_timed_launches

    study = optuna.create_study()
    assert study_timed_launches(study, TuneSettings(), 3.4) == {"iterations": 5, "warmup": 1}
    # A later process (or a resume) measured the kernel at another time: it keeps the choice.
    assert study_timed_launches(study, TuneSettings(), 0.01) == {"iterations": 5, "warmup": 1}
    assert study_timed_launches(study, TuneSettings(iterations=12), 0.01) == \
        {"iterations": 12, "warmup": 1}
    study.set_user_attr("timed_launches", {"iterations": "many", "warmup": -1})  # damaged
    assert study_timed_launches(study, TuneSettings(), 0.01) == {"iterations": 20, "warmup": 1}


def test_the_unsynced_journal_is_read_back_by_optunas_own_backend(tmp_path):
    from optuna.storages.journal import JournalFileBackend

    from mneme_cc.tune.storage import open_storage

    study = optuna.create_study(storage=open_storage(None, tmp_path), study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1) ** 2, n_trials=5)
    study.set_user_attr("timed_launches", {"iterations": 5, "warmup": 1})
    stock = optuna.storages.JournalStorage(JournalFileBackend(str(tmp_path / "study.log")))
    again = optuna.load_study(study_name="s", storage=stock)
    assert [t.params for t in again.trials] == [t.params for t in study.trials]
    assert again.user_attrs["timed_launches"] == {"iterations": 5, "warmup": 1}


def _append_many(backend, writer: int, lines: int) -> None:
    for n in range(lines):
        backend.append_logs([{"writer": writer, "n": n, "pad": "x" * (3000 + 7 * n)}])


def test_journal_appends_from_forked_processes_stay_whole(tmp_path):
    """Processes forked from one that appended already (its descriptor and
    flock shared) and appending at once: every line arrives whole, once."""
    import multiprocessing

    from optuna.storages.journal import JournalFileBackend

    from mneme_cc.tune.storage import _journal_backend

    path = str(tmp_path / "study.log")
    backend = _journal_backend(path)
    backend.append_logs([{"writer": -1, "n": 0}])
    fork = multiprocessing.get_context("fork")
    writers = [fork.Process(target=_append_many, args=(backend, w, 150)) for w in range(4)]
    for p in writers:
        p.start()
    _append_many(backend, 4, 150)
    for p in writers:
        p.join(60)
        assert p.exitcode == 0
    logs = list(JournalFileBackend(path).read_logs(0))
    assert len(logs) == 1 + 5 * 150
    for w in range(5):
        mine = [log for log in logs if log["writer"] == w]
        assert [log["n"] for log in mine] == list(range(150))
        assert all(log["pad"] == "x" * (3000 + 7 * log["n"]) for log in mine)


def test_a_journal_append_waits_for_the_lock_another_holds(tmp_path):
    """Another process appending holds the journal's flock: an append waits
    for it, then lands."""
    import fcntl
    import os
    import threading

    from mneme_cc.tune.storage import _journal_backend

    path = tmp_path / "study.log"
    backend = _journal_backend(str(path))
    other = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(other, fcntl.LOCK_EX)
        append = threading.Thread(target=backend.append_logs, args=([{"n": 1}],))
        append.start()
        append.join(0.5)
        assert append.is_alive() and path.read_text() == ""
        fcntl.flock(other, fcntl.LOCK_UN)
        append.join(10)
        assert not append.is_alive() and path.read_text() == '{"n":1}\n'
    finally:
        os.close(other)


def test_a_forked_process_takes_the_lock_through_its_own_descriptor(tmp_path):
    """A fork inherits the parent's descriptor: appending through it would
    not wait for the parent's flock. The child opens its own, and waits."""
    import fcntl
    import multiprocessing

    from mneme_cc.tune.storage import _journal_backend

    path = tmp_path / "study.log"
    backend = _journal_backend(str(path))
    backend.append_logs([{"n": 0}])
    held = backend._appending[1]
    fcntl.flock(held, fcntl.LOCK_EX)
    child = multiprocessing.get_context("fork").Process(target=backend.append_logs,
                                                        args=([{"n": 1}],))
    try:
        child.start()
        child.join(0.5)
        assert child.is_alive() and path.read_text() == '{"n":0}\n'
    finally:
        fcntl.flock(held, fcntl.LOCK_UN)
    child.join(10)
    assert child.exitcode == 0 and path.read_text() == '{"n":0}\n{"n":1}\n'


def test_a_replaced_journal_gets_the_next_append(tmp_path):
    """Appends follow the journal's path: a descriptor left on a file deleted
    or replaced since would write where no reader looks."""
    from mneme_cc.tune.storage import _journal_backend

    path = tmp_path / "study.log"
    backend = _journal_backend(str(path))
    backend.append_logs([{"n": 0}])
    path.unlink()
    (tmp_path / "new.log").write_text('{"m":0}\n')
    (tmp_path / "new.log").rename(path)
    backend.append_logs([{"n": 1}])
    assert path.read_text() == '{"m":0}\n{"n":1}\n'
    path.unlink()
    backend.append_logs([{"n": 2}])
    assert path.read_text() == '{"n":2}\n'


def test_where_flock_is_refused_the_symlink_lock_is_taken(tmp_path, monkeypatch):
    """A filesystem without flock (Lustre mounted noflock, NFS without a lock
    service): appends go on under Optuna's symlink lock."""
    import errno

    from mneme_cc.tune import storage

    def refused(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    path = tmp_path / "study.log"
    backend = storage._journal_backend(str(path))
    taken = []
    acquire = backend._lock.acquire
    monkeypatch.setattr(backend._lock, "acquire", lambda: taken.append(1) or acquire())
    monkeypatch.setattr(storage.fcntl, "flock", refused)
    backend.append_logs([{"n": 1}])
    backend.append_logs([{"n": 2}])
    assert path.read_text() == '{"n":1}\n{"n":2}\n' and taken == [1, 1]
    assert [p.name for p in tmp_path.iterdir()] == ["study.log"]  # the lock let go


def test_a_process_that_appended_exits_quietly(tmp_path):
    """The journal's descriptor is closed at exit without a word on stderr
    (a closer run while the interpreter tears down found `os` gone)."""
    import subprocess
    import sys

    # A study kept to the end, as a tuner's: collected while modules go.
    code = ("import sys, optuna; from pathlib import Path; "
            "from mneme_cc.tune.storage import open_storage; "
            "optuna.logging.set_verbosity(optuna.logging.WARNING); "
            "study = optuna.create_study(storage=open_storage(None, Path(sys.argv[1])), "
            "study_name='s'); study.optimize(lambda t: t.suggest_float('x', 0, 1), n_trials=2)")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == ""
    assert len((tmp_path / "study.log").read_text().splitlines()) > 2


def test_a_sampler_that_repeats_itself_is_asked_less(instance):
    steps = LocalSteps(Conditional(instance, H100), seed=4)
    steps.found(1.0, {"bounds": False, "fraction": 0.5, "unroll": 8})
    fresh = sum(steps.propose(WARM_UP, lambda p: True) is None for _ in range(2000))
    for _ in range(100):
        steps.sampled(repeated=True)
    assert steps.repeats > 0.99
    stale = sum(steps.propose(WARM_UP, lambda p: True) is None for _ in range(2000))
    assert 400 < fresh < 600 and stale < 10  # a quarter of the asks, then next to none
    for _ in range(100):
        steps.sampled(repeated=False)
    assert steps.repeats < 0.01


def test_a_local_step_is_one_trial_as_the_sampler_would_have_made_it(instance, tmp_path):
    """A step the tuner chose is created RUNNING in one write, with the
    distributions the space's suggests record and the owner a later start
    reclaims by; it is told as any other trial."""
    from mneme_cc.tune.ownership import start_owned_trial, this_process
    from mneme_cc.tune.storage import open_storage

    storage = open_storage(None, tmp_path)
    for name in ("standard", "auto"):
        study = optuna.create_study(storage=storage, sampler=optuna.samplers.RandomSampler(2))
        study_id = storage.get_study_id_from_name(study.study_name)
        space = load_space(name, instance, H100)
        sampled = study.ask()
        params = space.sample(sampled)
        study.tell(sampled, 1.0)
        step = start_owned_trial(study, storage, study_id, params, space.distributions(params),
                                 this_process())
        (frozen,) = [t for t in study.get_trials() if t.number == step.number]
        assert frozen.state == optuna.trial.TrialState.RUNNING
        assert frozen.params == params and frozen.user_attrs["owner"] == this_process()
        assert frozen.distributions == study.trials[sampled.number].distributions
        study.tell(step, 0.5)
        assert [t.state.name for t in study.trials] == ["COMPLETE"] * 2


def test_the_sampler_s_trials_take_the_queue_first_then_one_write_each(tmp_path, monkeypatch):
    """Queued trials are asked for through Optuna while there are any; then,
    for a sampler that reads the study itself, a trial is made in one write
    (no ask looking through the study for queued ones), carrying the owner,
    and a trial queued later is taken at the next look."""
    from mneme_cc.tune import ownership
    from mneme_cc.tune.ownership import TrialMaker, this_process
    from mneme_cc.tune.samplers import make_sampler
    from mneme_cc.tune.storage import open_storage

    storage = open_storage(None, tmp_path)
    study = optuna.create_study(storage=storage, sampler=make_sampler("tpe", seed=1))
    study_id = storage.get_study_id_from_name(study.study_name)
    study.enqueue_trial({"x": 1.0})
    study.enqueue_trial({"x": 2.0})
    maker, asks = TrialMaker(study, storage, study_id, this_process()), []
    monkeypatch.setattr(study, "ask", lambda: asks.append(1) or optuna.Study.ask(study))

    def one(value):
        trial = maker.ask()
        x = trial.suggest_float("x", 0.0, 4.0)
        study.tell(trial, value)
        return x

    assert [one(0.5), one(0.25)] == [1.0, 2.0] and len(asks) == 2  # the queue, through asks
    one(0.75)
    assert len(asks) == 3  # one more, that found the queue empty; then none
    writes = []

    def counted(name):
        real = getattr(storage, name)
        return lambda *a, **k: writes.append(name) or real(*a, **k)

    for name in ("create_new_trial", "set_trial_user_attr"):
        monkeypatch.setattr(storage, name, counted(name))
    trial = maker.ask()
    assert writes == ["create_new_trial"]  # the trial, its owner with it: one write
    study.tell(trial, 1.0)
    made = [one(float(n)) for n in range(20)]
    assert len(asks) == 3
    assert all(0.0 <= x <= 4.0 for x in made)
    assert all(t.user_attrs["owner"] == this_process() for t in study.trials)
    assert {t.state.name for t in study.trials} == {"COMPLETE"}
    monkeypatch.setattr(ownership, "QUEUE_LOOK_S", 0.0)
    maker._next_look = 0.0
    study.enqueue_trial({"x": 3.0})
    assert one(1.0) == 3.0  # taken at the next look
    # A sampler that reads through Optuna's per-ask cache is always asked.
    other = optuna.create_study(storage=storage, sampler=optuna.samplers.RandomSampler(1))
    maker = TrialMaker(other, storage, storage.get_study_id_from_name(other.study_name), {})
    monkeypatch.setattr(other, "ask", lambda: asks.append(1) or optuna.Study.ask(other))
    before = len(asks)
    for _ in range(3):
        other.tell(maker.ask(), 1.0)
    assert len(asks) == before + 3


def test_ending_a_trial_is_telling_it_without_the_copy(tmp_path):
    """end_trial stores what study.tell stores, calls the sampler's
    after_trial, and refuses a trial already finished as tell does."""
    from mneme_cc.tune.ownership import end_trial
    from mneme_cc.tune.storage import open_storage

    class Watching(optuna.samplers.RandomSampler):
        ended: list = []

        def after_trial(self, study, trial, state, values):
            self.ended.append((trial.number, state, values))

    study = optuna.create_study(storage=open_storage(None, tmp_path), sampler=Watching(seed=1))
    done, failed, pruned = study.ask(), study.ask(), study.ask()
    done.suggest_int("x", 0, 3)
    end_trial(study, done, [0.25])
    end_trial(study, failed, state=optuna.trial.TrialState.FAIL)
    end_trial(study, pruned, state=optuna.trial.TrialState.PRUNED)
    assert [(t.state.name, t.values) for t in study.trials] == [
        ("COMPLETE", [0.25]), ("FAIL", None), ("PRUNED", None)]
    assert Watching.ended == [(0, optuna.trial.TrialState.COMPLETE, [0.25]),
                              (1, optuna.trial.TrialState.FAIL, None),
                              (2, optuna.trial.TrialState.PRUNED, None)]
    with pytest.raises(ValueError):
        end_trial(study, done, [0.5])


def test_the_room_is_counted_again_near_the_end_and_now_and_then_far_from_it(
        instance, tmp_path, monkeypatch):
    """Far from the study's end the last count stands for ROOM_READ_INTERVAL_S;
    within ROOM_FAR trials of it every call counts."""
    from mneme_cc.tune import tuner as tuner_module
    from mneme_cc.tune.settings import TuneSettings

    tuner = tuner_module.Tuner(instance, TuneSettings(trials=10, out_dir=tmp_path / "s"),
                               props=H100)
    size = [0]
    reads = []
    monkeypatch.setattr(tuner, "_study_size", lambda *states: reads.append(1) or size[0])
    trials = tuner_module.ROOM_FAR + 100
    assert tuner._room(trials) == trials and len(reads) == 1
    size[0] = 200  # others made trials: the last count stands for a while
    assert tuner._room(trials) == trials and len(reads) == 1
    monkeypatch.setattr(tuner, "_room_read", (0.0, trials))  # the interval has passed
    assert tuner._room(trials) == trials - 200 and len(reads) == 2
    assert [tuner._room(trials) for _ in range(3)] == [trials - 200] * 3 and len(reads) == 5
