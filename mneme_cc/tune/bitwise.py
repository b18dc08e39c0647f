"""What a study that verifies bit for bit runs: configurations that keep the
build's numerics (docs/numerics.md), ptxas levels pinned where pinning keeps
them; the rest are pruned as `numerics_changing` with the reason."""

from __future__ import annotations

from mneme_cc.replay.compiling import ptx_kernel
from mneme_cc.replay.compiling.numerics import codegen_of, for_bitwise_study
from mneme_cc.replay.config import ReplayConfig


def keep_numerics(config: ReplayConfig, kernel,
                  allow_change: bool) -> tuple[ReplayConfig, str | None]:
    """(the config to run, None), or (config, why it must not run). A study that
    allows numerics changes, or verifies under per-buffer policies, runs all."""
    if allow_change or config.verify:
        return config, None
    if not kernel.has_ir:  # PTX: only ptxas's level may change the rounding
        changes = [] if config.baseline else ptx_kernel.numerics_changes(config)
        return config, "numerics-changing: " + "; ".join(changes) if changes else None
    return for_bitwise_study(config, codegen_of(kernel))
