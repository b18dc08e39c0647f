"""Replay: restore a recorded instance, recompile its IR, run, verify, time.

    from mneme_cc.replay import Replayer, ReplayConfig
"""

from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.numerics import Codegen, numerics_changes

__all__ = ["Codegen", "ReplayConfig", "Replayer", "ReplayResult", "numerics_changes"]


def __getattr__(name: str):
    # The session imports the CUDA bindings: only when asked for.
    if name in ("Replayer", "ReplayResult"):
        from mneme_cc.replay import replayer

        return getattr(replayer, name)
    raise AttributeError(name)
