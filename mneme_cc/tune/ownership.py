"""Who owns a running trial, and what becomes of trials whose owner died.

Several processes may share one study. Each trial is marked with its
owner (host, boot, pid namespace, pid and the pid's start time); a trial
left RUNNING by a process that has ended on this machine is reclaimed.
"""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path
from typing import Any


def _start_time(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/PID/stat): with the pid it
    names the process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


def this_process() -> dict[str, Any]:
    """Who asked for a trial: the host, its boot and pid namespace (containers
    share host names, not pids), the process and its start time."""
    import socket

    def read(path: str) -> str | None:
        try:
            return Path(path).read_text().strip() if "boot_id" in path else os.readlink(path)
        except OSError:
            return None

    return {"host": socket.gethostname(), "boot": read("/proc/sys/kernel/random/boot_id"),
            "pids": read("/proc/self/ns/pid"), "pid": os.getpid(),
            "start": _start_time(os.getpid())}


def running(owner: dict[str, Any]) -> bool:
    """Whether the process that owns a trial still runs (on this host)."""
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's: alive
    return owner.get("start") is None or _start_time(pid) == owner.get("start")


def reclaim_stale(study, storage, owner: dict[str, Any]) -> int:
    """Trials left RUNNING by a process that has ended (killed, crashed) on
    this machine (same boot, same pid namespace) become FAIL, marked
    `stale`, and an exhaustive study's combination is queued again; of two
    processes starting together, the one whose FAIL lands does that.
    Returns how many trials of the study are stale (they do not count
    toward --trials)."""
    import optuna
    from optuna.exceptions import UpdateFinishedTrialError

    state = optuna.trial.TrialState
    here = {k: owner[k] for k in ("host", "boot", "pids")}
    for t in study.get_trials(deepcopy=False, states=(state.RUNNING,)):
        owner = t.user_attrs.get("owner") or {}
        if {k: owner.get(k) for k in here} != here or running(owner):
            continue
        try:  # the mark first: a finished trial takes no attribute
            storage.set_trial_user_attr(t._trial_id, "stale",
                                             "its process ended before it finished")
            storage.set_trial_state_values(t._trial_id, state=state.FAIL)
        except (UpdateFinishedTrialError, RuntimeError):
            continue  # another process reclaimed it first
        if "fixed_params" in t.system_attrs:
            study.enqueue_trial(t.system_attrs["fixed_params"])
    return sum("stale" in t.user_attrs for t in study.get_trials(deepcopy=False))


def start_owned_trial(study, storage, study_id: int, params: dict[str, Any],
                      distributions: dict[str, Any], owner: dict[str, Any]):
    """A RUNNING trial with values the tuner chose itself (a local step; none
    for the sampler to fill), in one storage write: enqueueing, asking and
    suggesting each parameter would cost a write each. An optuna.trial.Trial,
    told as any other. The template is built as it is (create_trial's checks
    converted every distribution again: a tenth of a ms a trial, and the
    distributions are the space's own)."""
    import optuna

    frozen = optuna.trial.FrozenTrial(
        number=-1, trial_id=-1, state=optuna.trial.TrialState.RUNNING, value=None,
        datetime_start=datetime.datetime.now(), datetime_complete=None, params=params,
        distributions=distributions, user_attrs={"owner": owner}, system_attrs={},
        intermediate_values={})
    return optuna.trial.Trial(study, storage.create_new_trial(study_id, template_trial=frozen))


#: Seconds between looks for queued trials once the study had none.
QUEUE_LOOK_S = 1.0


class TrialMaker:
    """Starts the sampler's trials, each owned by this process. While the
    study holds queued trials (the application's settings, warm start's, a
    reclaimed one's), Optuna's ask takes them first. Once none is queued, and
    where the sampler reads the study itself (tpe_window.WindowedTPESampler), a
    trial is made in one write: an ask looks through every trial for queued
    ones (milliseconds at thousands of trials) and the owner mark is a second
    write. The queue is looked at again every QUEUE_LOOK_S."""

    def __init__(self, study, storage, study_id: int, owner: dict[str, Any]):
        import optuna

        self.study, self.storage, self.study_id, self.owner = study, storage, study_id, owner
        self._waiting = (optuna.trial.TrialState.WAITING,)
        self._direct = getattr(study.sampler, "reads_the_study_itself", False)
        self._queued, self._next_look = True, 0.0

    def ask(self):
        """A RUNNING trial for the sampler to fill (an optuna.trial.Trial)."""
        now = time.monotonic()
        if self._direct and not self._queued and now >= self._next_look:
            self._queued = self.storage.get_n_trials(self.study_id, self._waiting) > 0
            self._next_look = now + QUEUE_LOOK_S
        if self._queued or not self._direct:
            trial = self.study.ask()
            trial.set_user_attr("owner", self.owner)  # a later start reclaims it
            if "fixed_params" not in self.storage.get_trial_system_attrs(trial._trial_id):
                self._queued, self._next_look = False, now + QUEUE_LOOK_S  # the queue ran dry
            return trial
        return start_owned_trial(self.study, self.storage, self.study_id, {}, {}, self.owner)


def end_trial(study, trial, values: list[float] | None = None, state=None) -> None:
    """`study.tell` without the deep copy of the finished trial it returns,
    which the tuner never reads and which was half a tell's cost; Optuna's own
    tell where that inner step is not there."""
    try:
        from optuna.study._tell import _tell_with_warning
    except ImportError:
        study.tell(trial, values, state=state)
        return
    _tell_with_warning(study=study, trial=trial, value_or_values=values, state=state)
