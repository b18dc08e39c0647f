"""Replay: restore a recorded instance, recompile its IR, run, verify, time.

    from mneme_cc.replay import Replayer, ReplayConfig

Three rooms: `compiling` (IR or PTX to a cubin), `running` (the device, the
session, timing) and `judging` (verification, nondeterminism, the audit);
the config, the result and the outcomes that all three share are here.
"""

from mneme_cc.replay.compiling.numerics import Codegen, numerics_changes
from mneme_cc.replay.config import ReplayConfig

__all__ = ["Codegen", "ReplayConfig", "Replayer", "ReplayResult", "numerics_changes"]


def __getattr__(name: str):
    # The session imports the CUDA bindings: only when asked for.
    if name in ("Replayer", "ReplayResult"):
        from mneme_cc.replay.running import replayer

        return getattr(replayer, name)
    raise AttributeError(name)
