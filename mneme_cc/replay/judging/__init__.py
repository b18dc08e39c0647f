"""Judging: a replay's output against the recorded epilogue: the one comparer
(bitwise, per-buffer policies, on the GPU or the host), dtypes, nondeterminism
and the fidelity audit.

    from mneme_cc.replay.judging import Policy, compare, check_instance
"""

from __future__ import annotations

__all__ = ["Mismatch", "Policy", "check_instance", "compare", "diff_buffer", "policies_for"]

_HOME = {"Mismatch": "verify", "Policy": "verify", "check_instance": "audit",
         "compare": "verify", "diff_buffer": "compare", "policies_for": "verify"}


def __getattr__(name: str):
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(name)
