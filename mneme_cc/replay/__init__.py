"""Replay: restore a recorded instance, recompile its IR, run, verify, time.

Being built (issue 4): `config` (ReplayConfig) and `jit` (IR to PTX) are in
place; the device layer, verification and timing come next.
"""
