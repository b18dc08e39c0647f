"""Searching configurations of recorded instances (`mneme tune`)."""

from __future__ import annotations

from mneme_cc.errors import UsageError


def need_optuna():
    """The optuna module, or a one-line error saying how to get it."""
    try:
        import optuna
    except ImportError:
        raise UsageError("tuning needs Optuna: pip install 'mneme-cc[tune]' (or pip install "
                         "optuna)") from None
    return optuna
