"""The tuning loop: a search space, a sampler and an Optuna study drive a
ReplayExecutor; every finished trial is told to the study and appended to
`trials.jsonl`; `best.json` and `summary.json` are rewritten as it goes.

Several processes pointed at one RDB storage and study name cooperate: each
asks the study for trials and tells it results.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, wait
from concurrent.futures import TimeoutError as FuturesTimeout
from pathlib import Path
from typing import Any

from mneme_cc.errors import UsageError
from mneme_cc.replay import outcome as oc
from mneme_cc.replay.compiling.compiler import application_assembler
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running.timer import RACE_LAUNCHES
from mneme_cc.tune import askers, need_optuna, neighbours, summaries, warm_start
from mneme_cc.tune.bitwise import LearnedNumerics, keep_numerics
from mneme_cc.tune.device_loops import CLOSE_GRACE_S, DeviceLoops, merged, settings_for
from mneme_cc.tune.device_loops import wanted as device_loops_wanted
from mneme_cc.tune.executor import ReplayExecutor, TrialResult
from mneme_cc.tune.exhaustive import is_queued, queue_combinations
from mneme_cc.tune.feasibility import FaultingGeometries, Need, infeasible
from mneme_cc.tune.ownership import (
    TrialMaker,
    end_trial,
    reclaim_stale,
    start_owned_trial,
    this_process,
)
from mneme_cc.tune.presets import load_space
from mneme_cc.tune.properties import DeviceProperties
from mneme_cc.tune.samplers import OBJECTIVES, make_sampler
from mneme_cc.tune.settings import TuneSettings, study_timed_launches, timed_launches
from mneme_cc.tune.space import SearchSpace, value_key
from mneme_cc.tune.storage import describe, open_storage
from mneme_cc.tune.study_dir import StudyDir

REPORT_INTERVAL_S = 1.0
#: A trial races the best so far (TuneSettings.race): it stops timing when even
#: its fastest first launches are slower than the best's median by more than
#: RACE_SPREADS times the spread of the best's own samples, within
#: [RACE_LEAST, RACE_MOST] of that median. A stopped trial's median is at least
#: that fastest launch, so it could not have been the best; a kernel whose
#: launches vary races only what is far slower.
RACE_SPREADS, RACE_LEAST, RACE_MOST = 3.0, 0.02, 0.25
#: A study with more room than ROOM_FAR trials counts them again only every
#: ROOM_READ_INTERVAL_S: no set of processes makes that many in that time.
ROOM_FAR, ROOM_READ_INTERVAL_S = 5000, 0.5
#: How long cancelled work may take to report before its trials are closed anyway.
CANCEL_GRACE_S = 3.0


def race_threshold(median_ms: float, samples_ms: list[float]) -> float:
    """The time a raced trial's fastest first launch must beat, given the
    best's median and samples in the order they ran: RACE_SPREADS times
    their range past the median, at least RACE_LEAST and at most RACE_MOST
    of it. Past the fastest of the best's own first launches, where those
    ran slower than its median: the trial is judged by its first launches."""
    if not samples_ms or median_ms <= 0:
        return median_ms * (1 + RACE_MOST)
    spread = (max(samples_ms) - min(samples_ms)) / median_ms
    base = max(median_ms, min(samples_ms[:RACE_LAUNCHES]))
    return base * (1 + min(RACE_MOST, max(RACE_LEAST, RACE_SPREADS * spread)))


def _memo_key(params: dict[str, Any]) -> tuple:
    """A hashable stand-in for sampled parameters (space.value_key each)."""
    return tuple((name, value_key(value)) for name, value in sorted(params.items()))


class Tuner:
    def __init__(self, instance, settings: TuneSettings,
                 on_trial: Callable[[Tuner, TrialResult], None] | None = None,
                 props: DeviceProperties | None = None, executor=ReplayExecutor):
        """`props` and `executor` default to the real GPU; tests pass doubles."""
        optuna = need_optuna()

        self.instance, self.settings, self.on_trial = instance, settings, on_trial
        self.executor, self.given_props = executor, props
        # Set (an Event) where this tuner is the loop of one more device on
        # another tuner's study: it asks once that study is ready.
        self.joining = None
        self.stopped = False  # stop() was called
        self.device_loops: DeviceLoops | None = None  # the other devices' loops
        self.loop_summaries: list[dict[str, Any]] | None = None  # and what they did
        self.props = props or DeviceProperties.query(settings.devices[0])
        self.space: SearchSpace = load_space(settings.space, instance, self.props)
        iterations, warmup = timed_launches(settings, None)
        self.space.run = {"iterations": iterations, "warmup": warmup}
        self.space.changes_numerics = settings.allow_numerics_change
        if settings.verify:
            from mneme_cc.replay.judging.verify import policies_for

            # A policy naming no buffer of this instance is an error before any study exists.
            policies_for(settings.verify, instance.params, instance.args,
                         instance.prologue.allocations)
            self.space.run["verify"] = settings.verify
        self.name = settings.study_name or f"{instance.name}-{settings.space.replace('/', '_')}"
        self.out = Path(settings.out_dir or instance.db.path / "tune" / self.name)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        # A storage that cannot be opened is refused before the study directory exists.
        storage = open_storage(settings.storage, self.out)
        self.study_dir = StudyDir.create(self.out)
        self.storage_name = describe(settings.storage, self.out)
        directions = ["minimize"] * len(settings.objectives)
        existing = optuna.study.get_all_study_names(storage)
        if self.name in existing and not settings.resume:
            raise UsageError(f"study '{self.name}' already exists in {self.storage_name}: pass "
                             "--resume to continue it, or --study NAME for a new one")
        self.storage = storage
        self.state = optuna.trial.TrialState  # for the loop, without importing there
        self.study = optuna.create_study(
            study_name=self.name, storage=storage, directions=directions, load_if_exists=True,
            sampler=make_sampler(settings.sampler, len(directions), settings.seed))
        self.study_id = storage.get_study_id_from_name(self.name)
        self.counts: Counter[str] = Counter()
        self.distinct: Counter[str] = Counter()  # outcomes of configurations run, not repeats
        self.owner = this_process()
        self.maker = TrialMaker(self.study, storage, self.study_id, self.owner)
        self.stale = 0
        self.cancelled_before = 0  # trials a deadline cancelled in earlier runs
        self.results: dict[str, TrialResult] = {}   # grounded config key -> result
        self._judged: dict[Any, tuple] = {}  # _memo_key(parameters) -> _judge's answer
        # The step _untried accepted last and its _verdict, which its ask reuses.
        self._accepted: tuple[dict[str, Any] | None, tuple | None] = (None, None)
        # Trials whose config equals one still running: told when it finishes.
        self.waiting: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
        self.baseline: TrialResult | None = None
        self.best: TrialResult | None = None
        self.started = time.perf_counter()
        self.restarts = 0
        self._reported = 0.0  # when summary.json and best.json were last written
        self._room_read = (0.0, 0)  # when the study's room was last counted, and it
        self.deadline: float | None = None
        self.need, self.faulting = Need(), FaultingGeometries(instance.grid, instance.block)
        kernel = instance.db.kernel(instance.static_hash)  # what assembles its trials' PTX
        self.assembler = application_assembler(kernel).name if kernel.has_ir else None
        self.reference: TrialResult | None = None  # the `ir` baseline, when run
        self.time_spent: Counter[str] = Counter()  # study seconds by where they went
        self.local = neighbours.LocalSteps(self.space, settings.seed) \
            if settings.sampler == "tpe" and len(settings.objectives) == 1 else None
        self.askers: askers.Askers | None = None  # processes asking beside the loop
        # Values the contraction probe showed to change the numerics of a bitwise study.
        self.learned = LearnedNumerics(enabled=not (settings.allow_numerics_change or
                                                    settings.verify))
        self.racing = settings.race and settings.objectives == ["time"]
        self.raced = 0  # verified trials whose timing stopped early, slower than the best
        self.settled = 0  # those whose timing stopped early, their launches agreeing

    # -- bookkeeping --------------------------------------------------------

    def values(self, result: TrialResult) -> list[float]:
        return [float(getattr(result, OBJECTIVES[o])) for o in self.settings.objectives]

    def _tell(self, trial, params: dict[str, Any], result: TrialResult, duplicate: bool) -> None:
        began = time.perf_counter()
        if result.outcome == oc.CANCELLED:  # not a finding: a later run tries it again
            trial.set_user_attr("cancelled", True)
        # One attribute, not several: each is a storage transaction.
        trial.set_user_attr("result", {
            "outcome": result.outcome, "median_ms": result.median_ms,
            "samples_ms": result.samples_ms, "registers": result.registers,
            "cubin_bytes": result.cubin_bytes, "error": result.error[:500],
            "config": result.config.to_dict()})
        try:
            if result.verified:
                end_trial(self.study, trial, self.values(result))
            else:
                # A configuration that ran and is ruled out ends PRUNED, as one
                # ruled out before it ran: TPE learns from PRUNED trials and
                # leaves FAIL out, which is for trials that found nothing.
                end_trial(self.study, trial, state=self.state.FAIL
                          if result.outcome == oc.CANCELLED else self.state.PRUNED)
        except (ValueError, RuntimeError):
            pass  # reclaimed as stale by another process meanwhile: the result still counts here
        self._spent("result.write", began)  # a repeat's in the ask, the others' in the tell
        if result.verified and (self.best is None or self.values(result) < self.values(self.best)):
            self.best = result
        if result.verified and not duplicate and self.local:
            self.local.found(self.values(result)[0], params)
        self.counts[result.outcome] += 1
        if not duplicate:
            self.raced += result.raced
            self.settled += result.settled
        self.learned.told(params, result.outcome, duplicate)
        if not duplicate:
            self.distinct[result.outcome] += 1
            for stage, seconds in result.stage_seconds().items():
                self.time_spent[stage] += seconds
        self.study_dir.append_trial(summaries.trial_line(
            trial.number, params, result, duplicate,
            self.values(result) if result.verified else None))
        if self.on_trial:
            self.on_trial(self, result)

    def summary(self) -> dict[str, Any]:
        own = summaries.summary(self)
        if self.loop_summaries is None:
            return own
        return merged(own, self.loop_summaries, self.settings.devices[0])

    def best_record(self) -> dict[str, Any] | None:
        """What `mneme export` reads: the best verified config and its launch."""
        return summaries.best_record(self)

    def _write_reports(self) -> None:
        self._reported = time.perf_counter()
        if self.joining is None:  # the study's tuner writes them, for every loop
            self.study_dir.write(self.summary(), self.best_record())

    # -- the loop -----------------------------------------------------------

    def _study_size(self, *states) -> int:
        """Trials of the study in `states`, counting every process on it."""
        return self.storage.get_n_trials(self.study_id, states or None)

    def _room(self, trials: int) -> int:
        """How many more trials the study may hold. Trials whose process died or
        that a deadline cancelled do not count; those asked of the askers do
        (read first: one made meanwhile counts twice, never not at all).
        Far from the end, the last count stands for a while: counting reads
        every trial of the study, a millisecond per trial made at thousands."""
        now = time.perf_counter()
        last_read, last_room = self._room_read
        if last_room > ROOM_FAR and now - last_read < ROOM_READ_INTERVAL_S:
            return last_room
        asked = self.askers.unanswered if self.askers and not self.askers.broken else 0
        state = self.state
        size = self._study_size(state.RUNNING, state.COMPLETE, state.PRUNED, state.FAIL)
        room = trials - (size - self.stale - self.cancelled_before) - asked
        self._room_read = (now, room)
        return room

    def _queue_open(self) -> bool:
        """Exhaustive: only the enqueued combinations, never a random extra."""
        return self.settings.sampler != "exhaustive" or self._study_size(self.state.WAITING) > 0

    def run(self) -> dict[str, Any]:
        """Until the study holds `trials` trials (from every process on it), or
        until --timeout: then what is in flight is cancelled and closed."""
        s = self.settings
        begun = time.perf_counter()
        self.deadline = begun if self.stopped else begun + s.timeout if s.timeout else None
        if self.joining is None and device_loops_wanted(s):
            # The other devices' loops start their workers beside this one's;
            # this tuner keeps the first device and its share.
            self.device_loops = DeviceLoops(self)
            self.settings = s = dataclasses.replace(
                settings_for(s, s.devices[0], 0, len(s.devices)), resume=s.resume)
        ended = False
        try:
            self._run(s, begun)
            ended = True
        finally:
            if self.device_loops:  # on an error or Ctrl-C, they are stopped
                self.loop_summaries = self.device_loops.close((CLOSE_GRACE_S + (
                    0 if s.timeout else s.trial_timeout + s.compile_timeout)) if ended else None)
                self.device_loops = None
        self.time_spent["wall"] = time.perf_counter() - begun
        self._adopt_study_best()  # with several processes, the best may be another's
        self._write_reports()
        return self.summary()

    def _run(self, s: TuneSettings, begun: float) -> None:
        self.stale = reclaim_stale(self.study, self.storage, self.owner)
        earlier = self.study.get_trials(deepcopy=False)
        self.cancelled_before = sum("cancelled" in t.user_attrs for t in earlier)
        if self.learned.enabled:  # what this study and, warm, the kernel's others ran
            self.learned.told_earlier([(t.params, t.user_attrs["result"]) for t in earlier
                                       if "result" in t.user_attrs])
            if s.warm_start:
                self.learned.told_earlier(warm_start.lessons(self.instance.db.path, self.name,
                                                             self.instance))
        with self.executor(self.instance, devices=s.devices, compile_workers=s.compile_workers,
                            cache_dir=s.cache_dir, trial_timeout=s.trial_timeout,
                            compile_timeout=s.compile_timeout) as ex:
            self.time_spent["startup"] = time.perf_counter() - begun
            for kind, seconds in ex.start_seconds.items():
                self.time_spent[f"startup.{kind}"] = seconds
            self.baseline = self._within_deadline(ex, self.space.baseline())
            if self.joining is None:  # a joining loop times as the study's tuner chose
                self._time_as_the_study(ex, s)
            self.need = self._need(ex)
            calibrating = time.perf_counter()
            self.time_spent["baselines"] = calibrating - begun - self.time_spent["startup"]
            self.space.calibrate(lambda config: self._within_deadline(ex, config))
            # After calibrate(), which may add dimensions (auto's geometry).
            if self.joining is not None:  # the study's own tuner makes it ready
                trials = s.trials
                while not self.joining.wait(0.1) and not self._past_deadline():
                    pass
                self._time_as_the_study(ex, s)
            else:
                trials = queue_combinations(self.study, self.space, s.trials) \
                    if s.sampler == "exhaustive" else s.trials
                if s.sampler != "exhaustive" and not self.study.trials:
                    self._enqueue_first()
                if self.device_loops:
                    self.device_loops.study_ready()
            self.started = time.perf_counter()
            self.time_spent["calibrate"] = self.started - calibrating
            # The executor notes each trial's fault, and does not run a trial
            # queued before a fault ruled its geometry out.
            ex.faults = self.faulting
            in_flight: dict[Any, tuple] = {}  # future -> (trial, params, config, its key)
            try:
                self.askers = askers.start(self)
                # The loop thread's processor time, against the wall time of its
                # asks, tells and reports: what it waited for a processor, the
                # GIL or a blocking call (the journal's lock).
                cpu = time.thread_time()
                try:
                    self._loop(ex, in_flight, trials)
                finally:
                    self.time_spent["loop.cpu"] += time.thread_time() - cpu
            finally:
                try:
                    self._close_unfinished(ex, in_flight)
                    self.restarts = ex.restarts
                finally:
                    if self.askers:
                        self.askers.close()
        if ex.probe_compile_seconds:  # compiled ahead, beside the trials' own; read once closed
            self.time_spent["compile.probe"] += ex.probe_compile_seconds

    def _time_as_the_study(self, ex, s: TuneSettings) -> None:
        """The study's timed launches (chosen by its first process from the
        application's kernel time), and the baseline timed alike."""
        chosen = study_timed_launches(self.study, s, self.baseline.median_ms)
        if chosen != {k: self.space.run[k] for k in chosen}:
            self.space.run.update(chosen)
            self.baseline = self._within_deadline(ex, self.space.baseline())

    def _enqueue_first(self) -> None:
        """A new study's first trials: the application's settings, then warm start's."""
        first = self.space.initial_params()
        if first is not None:
            self.study.enqueue_trial(first)
        if self.settings.warm_start:
            warm_start.enqueue(self.study, self.name, self.instance, self.space)

    def stop(self) -> None:
        """Ends the study as its deadline would, now: what is in flight is
        cancelled and closed (from a signal handler, or another thread)."""
        self.stopped = True
        self.deadline = time.perf_counter()

    def _past_deadline(self) -> bool:
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def _remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.perf_counter()

    def _within_deadline(self, ex, config: ReplayConfig) -> TrialResult:
        """One evaluation outside the study (a baseline), cancelled at the deadline."""
        future = ex.submit(config)
        done, _ = wait([future], timeout=self._remaining())
        if not done:
            ex.cancel()
        try:
            return future.result(timeout=CANCEL_GRACE_S if not done else None)
        except FuturesTimeout:
            return TrialResult(oc.CANCELLED, config, error="the study's deadline came first")

    def _need(self, ex) -> Need:
        """What the kernel needs at its recorded settings: from the `ir` baseline's
        compile, when the kernel has IR and the deadline leaves time."""
        smem = self.instance.shared_mem_bytes
        kernel = self.instance.db.kernel(self.instance.static_hash)
        if not kernel.has_ir or (self._remaining() or 1.0) <= 0:
            return Need(shared_bytes=smem)
        reference = self._within_deadline(ex, dataclasses.replace(
            self.space.baseline(), baseline="ir"))
        self.reference = reference
        return Need(registers=reference.registers, shared_bytes=smem)

    def _loop(self, ex, in_flight: dict, trials: int) -> None:
        # Enough in flight to keep compilers and GPUs busy.
        depth = 2 * (len(ex.workers) + (self.settings.compile_workers or os.cpu_count() or 1))
        while True:
            if self._past_deadline():
                return
            # The loop's own time: asking (and pruning), then telling the study.
            t = time.perf_counter()
            pool = self.askers  # one that stopped still hands out what it made
            room = self._room(trials)  # a storage read costs more as the study grows
            room -= pool.ask_ahead(room) if pool else 0
            ran = True
            while len(in_flight) < depth and not self._past_deadline():
                # Near the end, and after a trial that ran nothing, others' count.
                if room <= depth or not ran:
                    room = self._room(trials)
                fresh = room > 0 and self._queue_open()  # else only an asker's trial
                before = len(in_flight)
                made = (fresh or pool and pool.buffered) and self._ask_one(ex, in_flight, fresh)
                if not made:
                    break
                room, ran = room - (made == "new"), len(in_flight) > before
            self.time_spent["ask"] += time.perf_counter() - t
            if not in_flight and not (pool and pool.delivering):
                # The askers' trials were all repeats or pruned, and none is
                # asked for: not the study's end while it has room.
                if not (pool and room > 0 and not self._past_deadline() and
                        pool.ask_ahead(room)):
                    return
            # The askers wake the loop only when it has room for their trials.
            woken = [pool.ready()] if pool and pool.delivering and len(in_flight) < depth else []
            done, _ = wait([*in_flight, *woken], timeout=self._remaining(),
                           return_when=FIRST_COMPLETED)
            t = time.perf_counter()
            for future in done & in_flight.keys():
                trial, params, _, key = in_flight.pop(future)
                self._finish(future, trial, params, key)
            if self.racing and self.best is not None:
                ex.race_above_ms = race_threshold(self.best.median_ms, self.best.samples_ms)
            self.time_spent["tell"] += time.perf_counter() - t
            self.restarts = ex.restarts
            # At most once a second: trials.jsonl already has every trial.
            if time.perf_counter() - self._reported > REPORT_INTERVAL_S:
                self._write_reports()
                self._spent("report", self._reported)

    def _ask_one(self, ex, in_flight: dict, fresh: bool = True) -> str | None:
        """Starts a trial: a local step or the sampler's ("new"; fresh: the study
        has room for one) or an asker's ("taken"); None when none was to be had."""
        began = time.perf_counter()
        step = fresh and self.local and self.local.propose(self.counts[oc.VERIFIED],
                                                           self._untried)
        pool, made = self.askers, "new"
        began = self._spent("ask.local", began)  # what each part of an ask costs
        if step:  # one write, where an enqueued trial's ask and suggests cost one each
            trial, params = start_owned_trial(
                self.study, self.storage, self.study_id, step,
                self.space.distributions(step, self.local.dims), self.owner), step
            self._spent("ask.write", began)
        elif pool and (pool.buffered or not fresh or pool.delivered and not pool.broken):
            # Once the askers deliver, the loop waits for theirs rather than asks.
            if not (taken := pool.take()):
                return None
            (trial, params), made = taken, "taken"
            self._spent("ask.askers", began)
        elif not fresh:
            return None
        else:
            trial = self.maker.ask()
            params = self.space.sample(trial)
            self._spent("ask.sampler", began)
        # A local step was checked whole before it was proposed (_untried).
        accepted = bool(step) and self._accepted[0] is step
        reason = None if accepted else self.space.constraints(params)
        if self.settings.sampler == "exhaustive" and not is_queued(self.storage, self.study_id,
                                                                       trial):
            # Another process took the last queued combination since our look.
            reason = "exhaustive: the queue was empty"
        if reason:
            self._prune(trial, reason)
            return made
        config, reason, pruned_as, key = self._accepted[1] if accepted else self._verdict(params)
        if reason:
            self._prune(trial, reason)
            self.counts[pruned_as] += 1
            return made
        if self.local and not step:
            self.local.sampled(key in self.results or key in self.waiting)
        if key in self.results:  # an equivalent config already ran
            self._tell(trial, params, self.results[key], duplicate=True)
        elif key in self.waiting:  # ... or is running
            self.waiting[key].append((trial, params))
        else:
            self.waiting[key] = []
            in_flight[ex.submit(config)] = (trial, params, config, key)
        return made

    def _spent(self, stage: str, since: float) -> float:
        """Adds the seconds since `since` to `stage` of time_spent; now."""
        now = time.perf_counter()
        self.time_spent[stage] += now - since
        return now

    def _prune(self, trial, reason: str) -> None:
        """Closes a trial that will not run, saying why."""
        trial.set_user_attr("constraint", reason)
        end_trial(self.study, trial, state=self.state.PRUNED)

    def _untried(self, params: dict[str, Any]) -> bool:
        """Whether a local step would run a configuration not run yet, and one
        that runs at all: a step that would be pruned costs the study's writes
        and gives nothing, so another step is tried."""
        # Most steps late in a study repeat a configuration: known from its
        # key alone, before the checks that need the config.
        _, reason, key = self._judge(params)
        if reason or key in self.results or key in self.waiting:
            return False
        verdict = self._verdict(params)
        self._accepted = (params, verdict)
        return not verdict[1]

    def _verdict(self, params: dict[str, Any]) -> tuple[ReplayConfig, str | None, str, str]:
        """(config to run, why it will not run or None, the outcome it is
        pruned as, its key): its numerics in a bitwise study (by the rules, or
        as the study learned), a device it does not fit, an earlier fault."""
        config, reason, key = self._judge(params)
        if reason or (reason := self.learned.reason(params)):
            return config, reason, oc.NUMERICS_CHANGING, key
        return config, infeasible(config, self.instance.block, self.props, self.need) \
            or self.faulting.reason(config), oc.INFEASIBLE, key

    def _judge(self, params: dict[str, Any]) -> tuple[ReplayConfig, str | None, str]:
        """(config to run, why not or None, its key): local steps ask twice."""
        memo = _memo_key(params)
        if (judged := self._judged.get(memo)) is None:
            if len(self._judged) >= 1 << 15:  # bounded: sampled reals seldom repeat
                self._judged.clear()
            config, reason = self._keep_numerics(self.space.derive(params))
            judged = self._judged[memo] = (config, reason, config.key())
        return judged

    def _finish(self, future, trial, params: dict[str, Any], key: str) -> None:
        result = future.result()  # its fault noted already (ReplayExecutor.faults)
        if result.outcome != oc.CANCELLED:  # a cancelled config may run another time
            self.results[key] = result
        self._tell_all(trial, params, result, key)

    def _tell_all(self, trial, params: dict[str, Any], result: TrialResult, key: str) -> None:
        """Tells a trial's result, and the same to the trials that waited on its key."""
        self._tell(trial, params, result, duplicate=False)
        for other, other_params in self.waiting.pop(key, []):
            self._tell(other, other_params, result, duplicate=True)

    def _close_unfinished(self, ex, in_flight: dict) -> None:
        """At the deadline (or on an error): stop the executor's work and close
        every trial still open, so none is left RUNNING."""
        if not in_flight:
            return
        ex.cancel()
        done, _ = wait(list(in_flight), timeout=CANCEL_GRACE_S)
        for future in list(in_flight):
            trial, params, config, key = in_flight.pop(future)
            if future in done:
                self._finish(future, trial, params, key)
                continue
            self._tell_all(trial, params, TrialResult(
                oc.CANCELLED, config, error="the study's deadline came first"), key)

    def _keep_numerics(self, config: ReplayConfig) -> tuple[ReplayConfig, str | None]:
        kernel = self.instance.db.kernel(self.instance.static_hash)
        return keep_numerics(config, kernel, self.settings.allow_numerics_change)

    def _adopt_study_best(self) -> None:
        """With several processes on one study, the best may be another's."""
        if len(self.settings.objectives) > 1:
            return
        try:  # not best_trials: that copies every trial of the study
            trial = self.study.best_trial
        except ValueError:  # none completed
            return
        if self.best is None or trial.values[0] < self.values(self.best)[0]:
            r = trial.user_attrs["result"]
            self.best = TrialResult(
                oc.VERIFIED, ReplayConfig.from_json(r["config"]),
                median_ms=r["median_ms"], samples_ms=r["samples_ms"], registers=r["registers"],
                cubin_bytes=r["cubin_bytes"])
