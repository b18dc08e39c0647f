"""TPE fitted on a window of the study: its latest and best trials.

Optuna's TPE rebuilds its estimators from the trials on every ask. Over the
whole history an ask cost a millisecond more per few hundred trials, and a
30 s study of a short kernel makes thousands. Fitted on a window, the best
(every trial its "good" density takes: Optuna's default takes the best 25
of at least 241 trials, so of the window's 250 or more finished ones) and
the latest (Optuna's default weights already fade the older ones), with the
running ones its constant liar needs, an ask costs the same at any size
past the window's: the window is kept up to date by reading the trials
that are new or were running at the last look.
"""

from __future__ import annotations

import copy
import heapq
import warnings
from collections import deque
from typing import Any

from optuna.exceptions import ExperimentalWarning
from optuna.samplers import TPESampler
from optuna.storages import JournalStorage
from optuna.trial import TrialState

#: Finished trials the window keeps: the latest, and the best completed.
TPE_LATEST = 250
TPE_BEST_KEPT = 50
#: Trials a look reads one by one from a journal, at most; past that (a
#: study's first look, a burst from other processes) it reads the study's
#: list at once, which costs about as much as 100 single reads at 10,000 trials.
READ_EACH_AT_MOST = 64


class TrialWindow:
    """The trials TPE is fitted on, kept up to date as the study grows. Each
    look takes in the trials that are new or were open (running or
    waiting) at the last look: a finished trial never changes."""

    def __init__(self, latest: int | None = None, best: int | None = None):
        self.best_kept = best or TPE_BEST_KEPT
        self.scanned = 0  # trials looked at (numbers below it)
        self.open: set[int] = set()  # numbers not finished at the last look
        self.best: list[tuple[float, int]] = []  # (-value, number): a heap of the best
        self.latest: deque[int] = deque(maxlen=latest or TPE_LATEST)  # as seen finishing
        self.trials: dict[int, Any] = {}  # number -> FrozenTrial, for those above
        self._chosen: dict[Any, list] = {}  # states -> the window's trials in them

    def look(self, trials) -> None:
        """Takes in the study's trials (a sequence of every one by number)."""
        numbers = [*self.open, *range(self.scanned, len(trials))]
        if not numbers:
            return
        # Every read before any change: one that fails leaves the window as it was.
        for number, frozen in [(n, trials[n]) for n in numbers]:
            self.trials[number] = frozen
            if not frozen.state.is_finished():
                self.open.add(number)
                continue
            self.open.discard(number)
            self.latest.append(number)
            if frozen.state == TrialState.COMPLETE:
                entry = (-frozen.values[0], number)
                if len(self.best) < self.best_kept:
                    heapq.heappush(self.best, entry)
                elif entry > self.best[0]:
                    heapq.heapreplace(self.best, entry)
        self.scanned = max(self.scanned, len(trials))
        members = {*self.latest, *(n for _, n in self.best), *self.open}
        self.trials = {n: self.trials[n] for n in sorted(members)}
        self._chosen = {}

    def select(self, states=None) -> list:
        """The window's trials in `states` (all states: None), in number order."""
        key = None if states is None else tuple(states)
        if key not in self._chosen:
            self._chosen[key] = [t for t in self.trials.values()
                                 if states is None or t.state in states]
        return self._chosen[key]


class _JournalTrials:
    """A journal's first `count` trials of a study, read one by one: a read
    costs a few microseconds, and a look wants only the new and the open."""

    def __init__(self, storage, study_id: int, count: int):
        self.storage, self.study_id, self.count = storage, study_id, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, number: int):
        return self.storage.get_trial(
            self.storage.get_trial_id_from_study_id_trial_number(self.study_id, number))


class _Windowed:
    """A study as TPE sees it: the trials of its TrialWindow (one objective),
    or every trial as read for the trial being sampled."""

    def __init__(self, study, trials: list | TrialWindow):
        self._study, self._trials = study, trials

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _get_trials(self, deepcopy: bool = True, states=None, use_cache: bool = False):
        if isinstance(self._trials, TrialWindow):
            trials = self._trials.select(states)
        else:
            trials = [t for t in self._trials if states is None or t.state in states]
        return copy.deepcopy(trials) if deepcopy else trials


class WindowedTPESampler(TPESampler):
    """Optuna's TPE, fitted on a TrialWindow of a single-objective study."""

    #: It reads the study once for each trial it samples, not through
    #: Optuna's cache, which only Study.ask renews: a trial made without an
    #: ask (ownership.TrialMaker) is sampled from a fresh read.
    reads_the_study_itself = True

    def __init__(self, **options):
        with warnings.catch_warnings():  # `group` is experimental in Optuna: a choice made here
            warnings.simplefilter("ignore", ExperimentalWarning)
            super().__init__(**options)
        self._windows: dict[int, TrialWindow] = {}  # study id -> its window
        self._read: tuple[tuple[int, int], _Windowed] | None = None  # (study, trial), view

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_read": None}  # the last view holds its study: not copied

    def _seen(self, study, trial) -> _Windowed:
        key = (study._study_id, trial.number)
        if self._read is None or self._read[0] != key:
            self._read = (key, _Windowed(study, self._look(study, trial)))
        return self._read[1]

    def _look(self, study, trial) -> list | TrialWindow:
        """The study's window brought up to the trial being sampled, or every
        trial where it has several objectives."""
        window = self._windows.get(study._study_id)
        if len(study.directions) == 1 and window is not None and \
                isinstance(study._storage, JournalStorage) and \
                len(window.open) + trial.number + 1 - window.scanned <= READ_EACH_AT_MOST:
            window.look(_JournalTrials(study._storage, study._study_id, trial.number + 1))
            return window
        trials = study._get_trials(deepcopy=False, use_cache=False)
        # Numbered from 0 without a gap, as Optuna numbers one study's trials.
        if len(study.directions) != 1 or trials and trials[-1].number != len(trials) - 1:
            return trials
        window = self._windows.setdefault(study._study_id, TrialWindow())
        window.look(trials)
        return window

    def infer_relative_search_space(self, study, trial):
        return super().infer_relative_search_space(self._seen(study, trial), trial)

    def sample_relative(self, study, trial, search_space):
        return super().sample_relative(self._seen(study, trial), trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return super().sample_independent(self._seen(study, trial), trial, param_name,
                                          param_distribution)
