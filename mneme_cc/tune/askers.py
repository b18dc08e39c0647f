"""Askers: processes that ask the study for the sampler's trials beside the
tuning loop.

A TPE ask costs several milliseconds of Python (its window of the study:
tpe_window.py), while a trial of a short kernel takes a millisecond or
two of GPU time: one loop that asks, submits and tells runs out of asks
before the GPU runs out of work. Each
asker (`python -m mneme_cc.tune.askers`) opens the same study on the same
storage (a journal file or an RDB, which several processes share anyway)
with its own seeded sampler. For each request on its stdin it asks the
study, marks the trial with the loop's owner (so a crash leaves it for the
next start to reclaim), samples the space's dimensions and writes the
trial's number and parameters as a JSON line. The loop tells those trials
as its own; what it never took is closed as cancelled when the study ends.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import warnings
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mneme_cc.tune.space import Dimension, sample_dimensions

#: Askers a study starts when not told: two per GPU it runs on (one GPU's
#: trials outpace one asker's TPE asks), and none on a small machine, where
#: they would take processors from the compiles.
ASKERS_PER_GPU, CPUS_PER_ASKER = 2, 4
#: Trials asked for or waiting, per asker: a sampler told of many running
#: trials at once spreads them, so more ahead would search worse, not faster.
AHEAD = 2
#: Seconds an asker may take to finish its ask once told to stop.
STOP_GRACE_S = 2.0


def automatic_count(cpus: int | None = None, gpus: int = 1) -> int:
    cpus = cpus or len(os.sched_getaffinity(0)) or 1  # a batch job's share, not the node's
    return min(ASKERS_PER_GPU * max(1, gpus), max(0, cpus // CPUS_PER_ASKER - 1))


@dataclass(frozen=True)
class AskerSpec:
    """What an asker process needs (pickled onto its stdin)."""
    storage: str | None
    study_dir: Path
    study_name: str
    sampler: str
    objectives: int
    seed: int | None
    dimensions: tuple[Dimension, ...]
    owner: dict[str, Any]


def main() -> None:
    """An asker's life: one trial per line on stdin, until it closes or says stop."""
    # Ctrl-C reaches the loop, which stops the askers by closing their stdin:
    # an asker interrupted between its ask and marking the trial would leave
    # a trial no start could reclaim.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    spec: AskerSpec = pickle.load(sys.stdin.buffer)
    out = sys.stdout
    try:
        import optuna

        from mneme_cc.tune.ownership import TrialMaker
        from mneme_cc.tune.samplers import make_sampler
        from mneme_cc.tune.storage import open_storage

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        storage = open_storage(spec.storage, spec.study_dir)
        study = optuna.load_study(study_name=spec.study_name, storage=storage,
                                  sampler=make_sampler(spec.sampler, spec.objectives, spec.seed))
        maker = TrialMaker(study, storage, study._study_id, spec.owner)
        for line in sys.stdin.buffer:
            if line.strip() != b"ask":
                return
            trial = maker.ask()
            params = sample_dimensions(spec.dimensions, trial)
            out.write(json.dumps({"number": trial.number, "params": params}) + "\n")
            out.flush()
    except Exception as exc:  # noqa: BLE001 - the loop goes on asking by itself
        out.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        out.flush()


class Askers:
    """`count` asker processes on one study; the loop's side of them."""

    def __init__(self, count: int, spec: AskerSpec, study, storage, study_id: int):
        import optuna

        self.owner = spec.owner
        self._trial_type = optuna.trial.Trial
        self._failed, self._running = optuna.trial.TrialState.FAIL, optuna.trial.TrialState.RUNNING
        self.study, self.storage, self.study_id = study, storage, study_id
        self._lock = threading.Lock()
        self._buffer: list[tuple[int, dict[str, Any]]] = []
        self._ready: Future = Future()
        self.delivered = 0    # trials handed to the loop
        self.broken: str | None = None
        self._closing = False
        self.processes: list[subprocess.Popen] = []
        self._asked: list[int] = []   # per asker: requests it has not answered
        self._readers: list[threading.Thread] = []
        for index in range(count):
            seeded = spec if spec.seed is None else \
                dataclasses.replace(spec, seed=spec.seed + 7919 * (index + 1))
            process = subprocess.Popen([sys.executable, "-m", "mneme_cc.tune.askers"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            process.stdin.write(pickle.dumps(seeded))
            process.stdin.flush()
            self.processes.append(process)
            self._asked.append(0)
            reader = threading.Thread(target=self._read, args=(index,), daemon=True,
                                      name=f"mneme-asker-{index}")
            reader.start()
            self._readers.append(reader)

    @property
    def unanswered(self) -> int:
        """Trials asked for that no asker has handed back yet."""
        return sum(self._asked)

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def delivering(self) -> bool:
        """Whether a trial waits, or may still come (the askers work and were asked)."""
        return bool(self._buffer) or (self.broken is None and self.unanswered > 0)

    def ask_ahead(self, room: int) -> int:
        """Keeps AHEAD trials per asker asked for or waiting, within the
        `room` the study has left; how many it asked for."""
        if self.broken is not None:
            return 0
        count = max(0, min(AHEAD * len(self.processes) - self.unanswered - len(self._buffer),
                           room))
        for asked in range(count):
            with self._lock:  # counted first: an asker dying now leaves it unanswered
                index = min(range(len(self._asked)), key=self._asked.__getitem__)
                self._asked[index] += 1
            try:
                self.processes[index].stdin.write(b"ask\n")
                self.processes[index].stdin.flush()
            except OSError as exc:
                with self._lock:
                    self._asked[index] -= 1
                self._break(f"asker {index} cannot be asked: {exc.strerror or exc}")
                return asked
        return count

    def ready(self) -> Future:
        """Done once a trial is waiting to be taken (or the askers broke)."""
        with self._lock:
            if (self._buffer or self.broken) and not self._ready.done():
                self._ready.set_result(None)
            return self._ready

    def take(self):
        """(trial, params) of a trial an asker made, or None if none waits."""
        with self._lock:
            if not self._buffer:
                return None
            number, params = self._buffer.pop(0)
            if not self._buffer and self._ready.done():
                self._ready = Future()
        self.delivered += 1
        return self._trial(number), params

    def close(self) -> None:
        """Stops the askers; every trial they made that the loop did not take
        is closed as cancelled (a later run tries its parameters again)."""
        self._closing = True
        for process in self.processes:
            try:
                process.stdin.close()
            except OSError:
                pass
        for process in self.processes:
            try:
                process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for reader in self._readers:
            reader.join()
        numbers = {number for number, _ in self._buffer}
        # A trial an asker was killed in the middle of is this loop's too.
        numbers |= {t.number for t in self.study.get_trials(deepcopy=False, states=(
            self._running,)) if t.user_attrs.get("owner") == self.owner}
        for number in sorted(numbers):
            trial = self._trial(number)
            trial.set_user_attr("cancelled", True)
            self.study.tell(trial, state=self._failed)
        self._buffer.clear()

    def _trial(self, number: int):
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(self.study_id, number)
        return self._trial_type(self.study, trial_id)

    def _break(self, why: str) -> None:
        with self._lock:
            if self.broken is None:
                self.broken = why
                print(f"mneme tune: {why}; the loop asks by itself", file=sys.stderr)
            if not self._ready.done():
                self._ready.set_result(None)

    def _read(self, index: int) -> None:
        for line in self.processes[index].stdout:
            try:
                answer = json.loads(line)
                number, params = answer.get("number"), answer.get("params")
            except (ValueError, AttributeError):
                answer, number = {"error": f"an answer that is not one: {line[:80]!r}"}, None
            if "error" in answer or not isinstance(number, int) or not isinstance(params, dict):
                self._break(f"asker {index} stopped ({answer.get('error', 'a bad answer')})")
                return
            with self._lock:
                self._buffer.append((number, params))
                self._asked[index] -= 1
                if not self._ready.done():
                    self._ready.set_result(None)
        with self._lock:
            open_requests = self._asked[index] > 0 and not self._closing
        if open_requests:  # it ended with requests open
            self._break(f"asker {index} ended with exit status "
                        f"{self.processes[index].wait()}")


def start(tuner) -> Askers | None:
    """The askers of a tuner's study, or None where the loop asks by itself:
    none wanted (by default none on SQLite), the exhaustive queue, or a space
    that samples its own way."""
    from mneme_cc.tune.space import SearchSpace

    settings = tuner.settings
    count = settings.askers
    if count is None:  # SQLite takes one writer at a time: more would wait on its lock
        sqlite = (settings.storage or "").startswith("sqlite")
        count = 0 if sqlite else automatic_count(gpus=len(settings.devices))
    if count < 1 or settings.sampler == "exhaustive" or \
            type(tuner.space).sample is not SearchSpace.sample:
        return None
    spec = AskerSpec(settings.storage, tuner.out, tuner.name, settings.sampler,
                     len(settings.objectives), settings.seed,
                     tuple(tuner.space.dimensions()), tuner.owner)
    return Askers(count, spec, tuner.study, tuner.storage, tuner.study_id)


if __name__ == "__main__":
    main()
