"""Triage: what differs between two device states (`mneme diff`), and which
pass, transform or ptxas level makes a configuration diverge (`mneme bisect`).

    from mneme_cc.triage import Bisector, diff, recorded_side, saved_side
"""

from __future__ import annotations

__all__ = ["Bisector", "Finding", "Side", "diff", "recorded_side", "replayed_sides",
           "saved_side"]

_HOME = {"Bisector": "bisect", "Finding": "bisect", "Side": "diff", "diff": "diff",
         "recorded_side": "diff", "replayed_sides": "diff", "saved_side": "diff"}


def __getattr__(name: str):
    # Names resolve on first use: diff needs numpy, bisect the CUDA bindings.
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"mneme_cc.triage.{_HOME[name]}"), name)
    raise AttributeError(name)
