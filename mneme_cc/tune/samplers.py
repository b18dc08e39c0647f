"""Samplers by name, and the objectives a study minimises."""

from __future__ import annotations

import copy
import heapq
from collections import deque
from typing import Any

from mneme_cc.errors import UsageError

#: Objective name -> the TrialResult attribute it minimises.
OBJECTIVES = {"time": "median_ms", "registers": "registers", "cubin_size": "cubin_bytes"}
SAMPLERS = ("tpe", "random", "exhaustive", "gp", "cmaes", "nsga2")


def parse_objectives(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in OBJECTIVES]
    if not names or unknown:
        raise UsageError(f"unknown objective(s) {', '.join(unknown) or '(none)'}: use one or "
                         f"more of {', '.join(OBJECTIVES)}, comma-separated")
    return names


#: TPE fits a single-objective study on its latest TPE_LATEST finished
#: trials, its TPE_BEST_KEPT best (all its "good" density takes: Optuna's
#: default takes at most 25) and those still running. Fitted on every trial,
#: an ask cost a millisecond more per few hundred trials, and a 30 s study
#: of a short kernel makes thousands; Optuna's default weights already fade
#: the older trials.
TPE_LATEST = 200
TPE_BEST_KEPT = 50


class TrialWindow:
    """The trials TPE is fitted on, kept up to date as the study grows. Each
    look reads the trials that are new or were open (running or waiting)
    at the last look: a finished trial never changes."""

    def __init__(self, latest: int | None = None, best: int | None = None):
        self.best_kept = best or TPE_BEST_KEPT
        self.scanned = 0  # trials looked at (numbers below it)
        self.open: set[int] = set()  # numbers not finished at the last look
        self.best: list[tuple[float, int]] = []  # (-value, number): a heap of the best
        self.latest: deque[int] = deque(maxlen=latest or TPE_LATEST)  # as seen finishing
        self.trials: dict[int, Any] = {}  # number -> FrozenTrial, for those above
        self._chosen: dict[Any, list] = {}  # states -> the window's trials in them

    def look(self, trial, count: int) -> None:
        """Takes in the study's first `count` trials, `trial(number)` reading
        one: those not looked at yet and those open at the last look."""
        from optuna.trial import TrialState

        numbers = [*self.open, *range(self.scanned, count)]
        if not numbers:
            return
        for number in numbers:
            frozen = self.trials[number] = trial(number)
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
        self.scanned = max(self.scanned, count)
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


def _windowed_tpe(**options):
    """Optuna's TPE, fitted on a window of a single-objective study's trials."""
    from optuna.samplers import TPESampler
    from optuna.storages import JournalStorage

    class WindowedTPESampler(TPESampler):
        #: It reads the study once for each trial it samples, not through
        #: Optuna's cache, which only Study.ask renews: a trial made without
        #: an ask (ownership.TrialMaker) is sampled from a fresh read.
        reads_the_study_itself = True

        def __init__(self, **options):
            super().__init__(**options)
            self._windows: dict[int, TrialWindow] = {}  # study id -> its window
            self._read: tuple[tuple[int, int], Any] | None = None  # (study, trial) -> view

        def _seen(self, study, trial):
            key = (study._study_id, trial.number)
            if self._read is None or self._read[0] != key:
                self._read = (key, _Windowed(study, self._look(study, trial)))
            return self._read[1]

        def _look(self, study, trial) -> list | TrialWindow:
            """The window, brought up to the trial being sampled; every trial
            where the study has several objectives."""
            if len(study.directions) != 1:
                return study._get_trials(deepcopy=False, use_cache=False)
            window = self._windows.setdefault(study._study_id, TrialWindow())
            storage, study_id = study._storage, study._study_id
            if isinstance(storage, JournalStorage):  # a trial's read costs no round trip
                window.look(lambda n: storage.get_trial(
                    storage.get_trial_id_from_study_id_trial_number(study_id, n)),
                    trial.number + 1)
            else:
                trials = study._get_trials(deepcopy=False, use_cache=False)
                window.look(trials.__getitem__, len(trials))
            return window

        def infer_relative_search_space(self, study, trial):
            return super().infer_relative_search_space(self._seen(study, trial), trial)

        def sample_relative(self, study, trial, search_space):
            return super().sample_relative(self._seen(study, trial), trial, search_space)

        def sample_independent(self, study, trial, param_name, param_distribution):
            return super().sample_independent(self._seen(study, trial), trial, param_name,
                                              param_distribution)

    return WindowedTPESampler(**options)


def make_sampler(name: str, objectives: int = 1, seed: int | None = None):
    """An Optuna sampler. Several objectives need one that keeps a Pareto
    front (tpe, random, exhaustive, nsga2)."""
    import optuna

    samplers = optuna.samplers
    if name not in SAMPLERS:
        raise UsageError(f"unknown sampler '{name}': use one of {', '.join(SAMPLERS)}")
    if objectives > 1 and name in ("gp", "cmaes"):
        raise UsageError(f"the {name} sampler takes one objective; use nsga2 or tpe for "
                         "several")
    try:
        if name == "tpe":
            # constant_liar keeps parallel trials from piling onto one point.
            return _windowed_tpe(seed=seed, multivariate=True, group=True, constant_liar=True)
        if name == "random":
            return samplers.RandomSampler(seed=seed)
        if name == "exhaustive":
            # The tuner enqueues every combination (space.combinations()).
            return samplers.RandomSampler(seed=seed)
        if name == "gp":
            import scipy  # noqa: F401 - GPSampler needs it (and torch) only when sampling
            import torch  # noqa: F401
            return samplers.GPSampler(seed=seed)
        if name == "cmaes":
            import cmaes  # noqa: F401
            return samplers.CmaEsSampler(seed=seed)
        return samplers.NSGAIISampler(seed=seed)
    except ImportError as exc:
        raise UsageError(f"the {name} sampler needs {exc.name}: pip install {exc.name}") \
            from None
