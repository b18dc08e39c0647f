"""Searching configurations of recorded instances (`mneme tune`).

    from mneme_cc.tune import Tuner, TuneSettings
    summary = Tuner(instance, TuneSettings(space="auto", timeout=60)).run()

Names resolve on first use (Optuna and the executor are heavy imports).
"""

from __future__ import annotations

from mneme_cc.errors import UsageError

__all__ = ["ReplayExecutor", "SearchSpace", "StudyDir", "TrialResult", "TuneSettings", "Tuner",
           "export_dataset", "load_space", "need_optuna"]

_HOME = {"ReplayExecutor": "executor", "TrialResult": "executor", "SearchSpace": "space",
         "load_space": "presets", "StudyDir": "study_dir", "TuneSettings": "settings",
         "Tuner": "tuner", "export_dataset": "dataset"}


def __getattr__(name: str):
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"mneme_cc.tune.{_HOME[name]}"), name)
    raise AttributeError(name)


def need_optuna():
    """The optuna module, or a one-line error saying how to get it."""
    try:
        import optuna
    except ImportError:
        raise UsageError("tuning needs Optuna: pip install 'mneme-cc[tune]' (or pip install "
                         "optuna)") from None
    return optuna
