"""`ReplayExecutor`: many configurations of one instance, compiled by a set of
compile processes and run by one worker process per GPU (tune.workers).

    with ReplayExecutor(instance, devices=[0], compile_workers=16) as ex:
        futures = [ex.submit(config) for config in configs]
        results = [f.result() for f in futures]      # TrialResult each

Each GPU worker restores the instance once and replays what it is sent,
holding the next trial while it replays one; a failure whose contraction
probe needs compiling comes back pending, and the probe runs once a compile
process has compiled it. Every trial ends in one outcome
(mneme_cc.replay.outcome). A trial that runs past `trial_timeout` gets its
worker killed; a compile past
`compile_timeout` gets its compile process killed; a kernel fault or a dead
worker is a runtime_error; each time a fresh process takes over and the
executor goes on. `cancel()` ends everything in flight at once (a study's
deadline): queued work and the work of killed processes end `cancelled`.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from mneme_cc.replay import outcome as oc
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.tune.feasibility import FaultingGeometries
from mneme_cc.tune.workers import GpuWorker, Worker, ready_all

GPU_DEPTH = 2  # trials a GPU worker holds: the one it replays and the next


class CompileJob(NamedTuple):
    """A trial to compile."""

    config: ReplayConfig
    started: float
    future: Future


class ProbeJob(NamedTuple):
    """A trial that failed verification with its contraction probe pending
    (the GPU worker does not compile the probe's variants): what the GPU
    worker answered, and the trial's stages, until the probe has run."""

    config: ReplayConfig
    failed: dict[str, Any]
    stages: dict[str, Any]
    started: float
    future: Future
    pending_at: float


class ReadyTrial(NamedTuple):
    """A trial ready for a GPU: its compile stages, and the kernel its compile
    process built (None for the application's image), sent on to the GPU worker
    so that it need not look it up again; or, with `probe_of`, the probe of a
    trial whose variants are compiled now (`waited`: what that trial had
    waited already, queued for a GPU or a compile process)."""

    config: ReplayConfig
    seconds: dict[str, float]
    kernel: dict[str, Any] | None
    started: float
    compiled_at: float
    future: Future
    probe_of: ProbeJob | None = None
    waited: float = 0.0


class _Jobs(queue.Queue):
    """A work queue where probes come before the trials waiting (a probe's
    trial has run already and waits on it alone), in the order they came."""

    def _init(self, maxsize: int) -> None:
        super()._init(maxsize)
        self.probes: collections.deque = collections.deque()

    def _qsize(self) -> int:
        return len(self.probes) + len(self.queue)

    def _put(self, item) -> None:
        probe = isinstance(item, ProbeJob) or getattr(item, "probe_of", None) is not None
        (self.probes if probe else self.queue).append(item)

    def _get(self):
        return self.probes.popleft() if self.probes else self.queue.popleft()


@dataclass
class TrialResult:
    outcome: str
    config: ReplayConfig
    median_ms: float | None = None
    samples_ms: list[float] = field(default_factory=list)
    registers: int | None = None
    spill_bytes: int | None = None
    cubin_bytes: int | None = None
    occupancy: float | None = None
    compile_seconds: dict[str, float] = field(default_factory=dict)   # by compile stage
    queue_seconds: float = 0.0    # compiled, waiting for a GPU
    replay_seconds: dict[str, float] = field(default_factory=dict)    # by replay stage
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""               # why, for any outcome but verified
    seconds: float = 0.0          # wall time of the trial
    raced: bool = False           # timed in part: slower than the best (LaunchTimer)

    @property
    def verified(self) -> bool:
        """Passed verification: bitwise, or within a nondeterministic spread."""
        return self.outcome in oc.PASSED

    @property
    def settled(self) -> bool:
        """Timed in part, not raced: its first timed launches agreed (LaunchTimer)."""
        return self.verified and not self.raced and \
            0 < len(self.samples_ms) < self.config.iterations

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def stage_seconds(self) -> dict[str, float]:
        """Where the trial's time went: compile.<stage>, queue, gpu.<stage>."""
        out = {f"compile.{k}": v for k, v in self.compile_seconds.items()}
        if self.queue_seconds:
            out["queue"] = self.queue_seconds
        out.update({f"gpu.{k}": v for k, v in self.replay_seconds.items()})
        return out


class CompileAhead:
    """When a compile process that has compiled a trial also compiles what
    that trial's contraction probe would run, so that the GPU worker finds
    it compiled should the trial fail: once the probe has explained a
    failure, and only while the items waiting for the GPUs would keep them
    busy at least as long as that compile takes. A failure whose probe was not
    compiled ahead still has it compiled, then (ProbeJob); compiling ahead
    for every trial that waits doubles the compiles, and on a host whose
    compile processes fill its cores it takes them from the trials' own."""

    SMOOTHING = 0.2  # a new measure's weight in the running estimates

    def __init__(self, gpus: int):
        self.gpus = max(1, gpus)
        self.explains = False  # the contraction probe explained a failure
        self.gpu_each = 0.0  # seconds a GPU worker spends on an item
        self.compile_each: float | None = None  # seconds a probe's compile takes
        self.seconds = 0.0  # seconds compiled ahead, over the compile processes
        self._lock = threading.Lock()

    def wanted(self, waiting: int, compiled_in: float) -> bool:
        """Whether to compile ahead now, with `waiting` items queued for the
        GPUs; `compiled_in`: the trial's own compile just now, which stands
        for a probe's until one was timed."""
        if not self.explains:
            return False
        compile_each = compiled_in if self.compile_each is None else self.compile_each
        return waiting * self.gpu_each / self.gpus >= compile_each

    def gpu_ran(self, seconds: float) -> None:
        """A GPU worker's seconds for one item (a trial or a probe)."""
        with self._lock:
            self.gpu_each = self._smoothed(self.gpu_each or None, seconds)

    def compiled(self, seconds: float, timed: bool, ahead: bool) -> None:
        """A probe's compile took `seconds`: ahead of its trial's failure, or
        after it (the failure's own stage, not counted here). Only a `timed`
        one (it compiled) moves the estimate: a timeout's would hold off
        compiling ahead for dozens of compiles."""
        with self._lock:
            if timed:
                self.compile_each = self._smoothed(self.compile_each, seconds)
            if ahead:
                self.seconds += seconds

    def _smoothed(self, estimate: float | None, seconds: float) -> float:
        return seconds if estimate is None else estimate + self.SMOOTHING * (seconds - estimate)


class ReplayExecutor:
    """Compiles in `compile_workers` processes; runs on each of `devices`."""

    compiler_class, gpu_worker_class = Worker, GpuWorker  # the processes' kinds

    def __init__(self, instance, devices=(0,), compile_workers: int | None = None,
                 cache_dir: str | Path | None = None, trial_timeout: float = 60.0,
                 compile_timeout: float = 60.0, start_timeout: float = 600.0):
        args = (str(instance.db.path), instance.name, str(cache_dir) if cache_dir else None)
        self.trial_timeout, self.compile_timeout = trial_timeout, compile_timeout
        # The race threshold (the tuner sets it): a trial slower stops after 3
        # timed launches; with it set, a trial may also settle after 5.
        self.race_above_ms: float | None = None
        # The launch geometries the study found faulting, or None (the tuner
        # sets it): told of every trial's outcome as it settles, and asked
        # why a trial should no longer run as it is sent to a GPU worker
        # (what the study learned while it was compiled and queued).
        self.faults: FaultingGeometries | None = None
        # Whether a compile process that has compiled a trial also compiles
        # what its contraction probe would run (mneme_cc.tune.workers).
        self.ahead = CompileAhead(len(devices))
        self._cancelled = threading.Event()
        # What the workers are working on or hold: cancel() ends it without waiting.
        self._current: dict[Future, tuple[ReplayConfig, float]] = {}  # future -> (config, started)
        self.compilers: list[Worker] = []
        self.workers: list[GpuWorker] = []
        try:
            # Compile processes start (import LLVM, read the instance) while the
            # GPU workers restore the instance, not during the first trials, and
            # each GPU's worker beside the others' (a context and a restore each).
            for _ in range(compile_workers or os.cpu_count() or 1):
                self.compilers.append(self.compiler_class(*args, start_timeout=start_timeout,
                                                          wait=False))
            for d in devices:
                self.workers.append(self.gpu_worker_class(*args, d, start_timeout=start_timeout,
                                                           wait=False))
            ready_all([*self.workers, *self.compilers])
        except BaseException:
            for worker in (*self.workers, *self.compilers):
                worker.cancel()  # not left to finish a start: killed
            self._close_workers()
            raise
        self.arch = self.workers[0].arch
        # Seconds until the slowest of each kind was ready: GPU workers restore
        # the instance, compile processes import LLVM and read it.
        self.start_seconds = {"gpu": max(w.start_seconds for w in self.workers),
                              "compile": max((w.start_seconds for w in self.compilers),
                                             default=0.0)}
        self._compile_queue: queue.Queue = _Jobs()
        self._gpu_queue: queue.Queue = _Jobs()
        self._threads = [threading.Thread(target=self._compile, args=(w,), daemon=True)
                         for w in self.compilers]
        self._threads += [threading.Thread(target=self._serve, args=(w,), daemon=True)
                          for w in self.workers]
        for thread in self._threads:
            thread.start()

    @property
    def restarts(self) -> int:
        """How many times a GPU worker was replaced (after hangs, faults, crashes)."""
        return sum(w.restarts for w in self.workers)

    def submit(self, config: ReplayConfig) -> Future:
        """A Future of the TrialResult; compilation starts as soon as a compile
        process is free."""
        future: Future = Future()
        now = time.perf_counter()
        if self._cancelled.is_set():
            self._settle(future, self._cancelled_result(config, now))
        elif config.baseline == "original":  # the application's image: nothing to compile
            self._gpu_queue.put(ReadyTrial(config, {}, None, now, now, future))
        else:
            self._compile_queue.put(CompileJob(config, now, future))
        return future

    def evaluate(self, config: ReplayConfig) -> TrialResult:
        return self.submit(config).result()

    @staticmethod
    def _settle(future: Future, result: TrialResult) -> None:
        """Sets a result unless cancel() already did."""
        try:
            future.set_result(result)
        except InvalidStateError:
            pass

    @staticmethod
    def _cancelled_result(config: ReplayConfig, started: float, **stages) -> TrialResult:
        return TrialResult(oc.CANCELLED, config, error="cancelled: the study's deadline came "
                           "first", seconds=time.perf_counter() - started, **stages)

    def _compile(self, worker: Worker) -> None:
        while (item := self._compile_queue.get()) is not None:
            try:
                if isinstance(item, ProbeJob):
                    self._compile_probe(worker, item)
                else:
                    self._compile_one(worker, *item)
            except BaseException as exc:  # noqa: BLE001 - never leave a future unresolved
                self._current.pop(item.future, None)
                self._settle(item.future, TrialResult(oc.COMPILE_ERROR, item.config,
                             error=f"the compile stage failed: {type(exc).__name__}: {exc}"))

    def _compile_one(self, worker: Worker, config: ReplayConfig, started: float,
                     future: Future) -> None:
        if self._cancelled.is_set():
            self._settle(future, self._cancelled_result(config, started))
            return
        self._current[future] = (config, started)
        asked = time.perf_counter()
        kind, reply = worker.ask((config.to_json(), self.arch, False), self.compile_timeout)
        compiled_in = time.perf_counter() - asked
        self._current.pop(future, None)
        spent = {"compile_seconds": {"failed": time.perf_counter() - started}}
        if self._cancelled.is_set():
            self._settle(future, self._cancelled_result(config, started))
        elif kind == "timeout":
            self._settle(future, TrialResult(
                oc.COMPILE_TIMEOUT, config, seconds=time.perf_counter() - started, **spent,
                error=f"compiling took more than {self.compile_timeout:g} s: the compile "
                      "process was killed"))
        elif kind == "died" or reply[0]:
            error = reply[0] if kind == "reply" else \
                f"the compile process died (exit status {reply})"
            self._settle(future, TrialResult(oc.COMPILE_ERROR, config, error=error, **spent,
                                              seconds=time.perf_counter() - started))
        else:
            self._gpu_queue.put(ReadyTrial(config, reply[1], reply[2] if len(reply) > 2 else None,
                                          started, time.perf_counter(), future))
            # With the trial queued, and only while the GPUs have work enough.
            if self.ahead.wanted(self._gpu_queue.qsize(), compiled_in):
                self.ahead.compiled(*self._compile_probe_variants(worker, config), ahead=True)

    def _compile_probe(self, worker: Worker, job: ProbeJob) -> None:
        """Compiles what a failed trial's pending probe runs (its `probe`
        compile stage), then queues the probe for a GPU. Should a compile
        fail, the GPU worker's probe compiles what is missing itself."""
        if self._cancelled.is_set():
            self._settle(job.future, self._cancelled_result(job.config, job.started, **job.stages))
            return
        self._current[job.future] = (job.config, job.started)
        begun = time.perf_counter()
        spent, timed = self._compile_probe_variants(worker, job.config)
        self.ahead.compiled(spent, timed, ahead=False)
        self._current.pop(job.future, None)
        now = time.perf_counter()
        job.stages["compile_seconds"] = {**job.stages["compile_seconds"], "probe": spent}
        waited = job.stages["queue_seconds"] + begun - job.pending_at
        self._gpu_queue.put(ReadyTrial(job.config, {}, None, job.started, now, job.future, job,
                                       waited))
        if self._cancelled.is_set():  # cancel() may have drained the queue already
            self._drain()

    def _compile_probe_variants(self, worker: Worker, config: ReplayConfig) -> tuple[float, bool]:
        """Compiles what config's contraction probe would run (two compiles,
        so twice a compile's limit); gives the seconds it took and whether
        they timed such a compile (not a timeout, a death, an error or a
        configuration the probe does not apply to). Whatever happens is no
        trial's outcome (the probe compiles what is missing)."""
        begun = time.perf_counter()
        timed = False
        try:
            kind, reply = worker.ask((config.to_json(), self.arch, True), 2 * self.compile_timeout)
            timed = kind == "reply" and not reply[0] and bool(reply[1])
        except Exception:  # noqa: BLE001 - never the queued trial's failure
            pass
        return time.perf_counter() - begun, timed

    @property
    def probe_compile_seconds(self) -> float:
        """Compile processes' seconds spent compiling ahead for probes (no
        trial's own: a trial's pending probe is its `probe` compile stage)."""
        return self.ahead.seconds

    def _serve(self, worker: GpuWorker) -> None:
        """Keeps up to GPU_DEPTH trials with the worker: the next is in its
        pipe while it replays one, so it starts as soon as that one is
        answered, not after this thread's turn comes round. A second trial is
        taken only while there are trials enough for every GPU."""
        sent: collections.deque = collections.deque()

        def dispatch(item: ReadyTrial) -> None:
            if (stages := self._guard(item, self._send_trial, worker, item)) is not None:
                if not sent:  # the worker is idle: it starts now
                    self._starts(item, stages)
                sent.append((item, stages))

        stopping = False
        while True:
            while not stopping and len(sent) < GPU_DEPTH:
                if sent and self._gpu_queue.qsize() < len(self.workers):
                    break
                try:
                    item = self._gpu_queue.get(block=not sent)
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                else:
                    dispatch(item)
            if not sent:
                if stopping:
                    return
                continue
            item, stages = sent.popleft()
            restarts = worker.restarts
            self._guard(item, self._answer_trial, worker, item, stages)
            if worker.restarts != restarts:  # what the old process held is lost: sent again
                held = [i for i, _ in sent]
                sent.clear()
                for i in held:
                    dispatch(i)
            elif sent:
                self._starts(*sent[0])  # held, it started as this answer came

    @staticmethod
    def _starts(item: ReadyTrial, stages: dict) -> None:
        """The trial (or probe) reaches the GPU now: its wait for one ends."""
        stages["queue_seconds"] = item.waited + time.perf_counter() - item.compiled_at

    def _guard(self, item: ReadyTrial, step: Callable[..., Any], *args) -> Any:
        """step(*args); a step that fails ends the item's trial as a runtime error
        (and gives None)."""
        config, started, future = item.config, item.started, item.future
        try:
            return step(*args)
        except BaseException as exc:  # noqa: BLE001 - never leave a future unresolved
            self._current.pop(future, None)
            self._settle(future, TrialResult(oc.RUNTIME_ERROR, config, error=f"the GPU "
                         f"stage failed: {type(exc).__name__}: {exc}",
                         seconds=time.perf_counter() - started))
            return None

    def _send_trial(self, worker: GpuWorker, item: ReadyTrial) -> dict | None:
        """Sends the queued trial to the worker and gives its stages so far;
        None when it ends before the GPU (cancelled, or vetoed by what the
        study learned meanwhile)."""
        config, started, future = item.config, item.started, item.future
        stages = item.probe_of.stages if item.probe_of else {
            "compile_seconds": item.seconds, "queue_seconds": 0.0}
        self._starts(item, stages)  # until the worker starts it
        self._current.pop(future, None)  # sent again: the worker that held it is gone
        if self._cancelled.is_set():
            self._settle(future, self._cancelled_result(config, started, **stages))
            return None
        if item.probe_of:  # the trial ran: its probe is no new trial to veto or race
            self._current[future] = (config, started)
            worker.send((config.to_json(), None, None, True))
            return stages
        if config.baseline is None and self.faults is not None and \
                (why := self.faults.reason(config)):
            self._settle(future, TrialResult(oc.INFEASIBLE, config, error=why, **stages,
                                             seconds=time.perf_counter() - started))
            return None
        self._current[future] = (config, started)
        # A trial (not a baseline) races the best so far, as it is when sent.
        race = self.race_above_ms if config.baseline is None else None
        # Built for the first GPU's architecture: another's worker compiles its own.
        kernel = item.kernel if worker.arch == self.arch else None
        worker.send((config.to_json(), race, kernel, False))
        return stages

    def _answer_trial(self, worker: GpuWorker, item: ReadyTrial, stages: dict) -> None:
        """Waits for the worker's answer to the oldest trial sent and settles it."""
        config, started, future = item.config, item.started, item.future
        # A worker whose kernel faulted has lost its context: it is replaced.
        kind, reply = worker.receive(self.trial_timeout,
                                     restart_if=lambda r: r.get("outcome") == oc.RUNTIME_ERROR)
        self._current.pop(future, None)
        if kind == "reply" and reply.get("replay_seconds"):  # a replay's or a probe's
            self.ahead.gpu_ran(sum(reply["replay_seconds"].values()))
        if self._cancelled.is_set():
            self._settle(future, self._cancelled_result(config, started, **stages))
            return
        if kind == "timeout":
            reply = {"outcome": oc.TIMEOUT, "error": f"no result within "
                     f"{self.trial_timeout:g} s: the worker was killed"}
        elif kind == "died":
            reply = {"outcome": oc.RUNTIME_ERROR,
                     "error": f"the replay worker died (exit status {reply})"}
        if reply.pop("probe_pending", False):  # compiled elsewhere, then probed
            self._compile_queue.put(ProbeJob(config, reply, stages, started, future,
                                             time.perf_counter()))
            if self._cancelled.is_set():  # cancel() may have drained the queue already
                self._drain()
            return
        if item.probe_of:
            reply = _probed(item.probe_of.failed, reply)
        reply.setdefault("error", "")
        if reply["outcome"] == oc.NUMERICS_CHANGING:
            self.ahead.explains = True
        result = TrialResult(config=config, seconds=time.perf_counter() - started,
                             **stages, **reply)
        if result.outcome == oc.FAILED_VERIFICATION and result.mismatches:
            first = result.mismatches[0]
            # An element type counts elements; a brief mismatch has none (bytes).
            unit = "element" if (first.get("stats") or {}).get("dtype") else "byte"
            result.error = f"{first['buffer']}: {first['count']} {unit}(s) differ"
        if self.faults is not None:  # before the trials held behind it are sent again
            self.faults.note(config, result.outcome, result.error)
        self._settle(future, result)

    def cancel(self) -> None:
        """Ends all work at once: queued configurations and those being compiled
        or replayed end `cancelled` now, and every process is killed. The
        executor takes no more work after this."""
        self._cancelled.set()
        for worker in (*self.compilers, *self.workers):
            worker.cancel()
        for future, (config, started) in list(self._current.items()):
            self._settle(future, self._cancelled_result(config, started))
        self._drain()

    def _drain(self) -> None:
        """Ends the work still queued as cancelled."""
        for q in (self._compile_queue, self._gpu_queue):
            while True:
                try:
                    item = q.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    self._settle(item.future, self._cancelled_result(item.config, item.started))

    def _close_workers(self) -> None:
        for worker in (*self.workers, *self.compilers):
            worker.close()

    def close(self) -> None:
        for _ in self.compilers:
            self._compile_queue.put(None)
        for _ in self.workers:
            self._gpu_queue.put(None)
        if not self._cancelled.is_set():
            for thread in self._threads:
                thread.join()
        # A killed process's thread may still wait for it to exit (a GPU
        # context takes a while to tear down): it is a daemon, left to finish.
        self._drain()
        self._close_workers()

    def __enter__(self) -> ReplayExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _probed(failed: dict[str, Any], probed: dict[str, Any]) -> dict[str, Any]:
    """A failed trial's answer once its pending probe has run: the probe's
    verdict and seconds with the failure's measures; a probe that could not
    judge (its compile refused) leaves the failure as it was; a probe's fault
    or hang is the trial's end, as when the probe ran with the trial."""
    if probed["outcome"] not in (oc.NUMERICS_CHANGING, oc.FAILED_VERIFICATION, oc.COMPILE_ERROR):
        return probed
    seconds = dict(failed.get("replay_seconds") or {})
    for stage, spent in (probed.get("replay_seconds") or {}).items():
        seconds[stage] = seconds.get(stage, 0.0) + spent
    judged = probed["outcome"] != oc.COMPILE_ERROR
    return {**failed, "replay_seconds": seconds,
            "outcome": probed["outcome"] if judged else failed["outcome"],
            "error": probed.get("error") if judged and probed.get("error") else failed.get("error", "")}
