"""What a study that verifies bit for bit runs: configurations that keep the
build's numerics (docs/numerics.md), ptxas levels pinned where pinning keeps
them; the rest are pruned as `numerics_changing` with the reason. What the
rules cannot tell before a configuration runs, a study learns from the
contraction probe's verdicts (LearnedNumerics)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from mneme_cc.replay import outcome as oc
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


#: How many numerics-changing trials a parameter value must explain alone,
#: never once verified, before a study prunes it before it runs.
LEARNED_AFTER = 8


class LearnedNumerics:
    """Parameter values a bitwise study found to change the numerics by
    running them: with fast contraction, which multiply-adds the back end
    fuses follows the code the pipeline leaves (no unrolling, or an `O1`
    pipeline, fuses other pairs than the build's `O3`), which no rule reads
    from a configuration. A numerics-changing trial (the contraction probe's
    verdict) blames the one value of it that no verified trial has had; a
    value blamed LEARNED_AFTER times and never verified is learned, and
    later configurations with it are pruned as numerics-changing before they
    run. A value a verified trial has is never learned (nor kept learned)."""

    def __init__(self, after: int | None = None):
        self.after = after or LEARNED_AFTER
        self.verified: set[tuple[str, str]] = set()  # (name, value as JSON) of verified trials
        self.blamed: Counter[tuple[str, str]] = Counter()
        self.learned: dict[tuple[str, str], str] = {}  # -> the reason a configuration gets

    def told(self, params: dict[str, Any], outcome: str) -> None:
        """A trial that ran (not a repeat), and its outcome."""
        values = {(name, json.dumps(value, default=str)) for name, value in params.items()}
        if outcome in oc.PASSED:
            self.verified |= values
            for value in values & self.learned.keys():
                del self.learned[value]
        elif outcome == oc.NUMERICS_CHANGING:
            suspects = values - self.verified
            if len(suspects) == 1:
                (value,) = suspects
                self.blamed[value] += 1
                if self.blamed[value] >= self.after:
                    name = value[0]
                    self.learned[value] = (
                        f"numerics-changing: {name}={params[name]!r} fused other multiply-adds "
                        f"than the build in each of the {self.blamed[value]} trials that ran "
                        "it (the contraction probe), and in no verified one")

    def reason(self, params: dict[str, Any]) -> str | None:
        """Why a configuration with these parameters is not run, or None."""
        if not self.learned:
            return None
        for name, value in params.items():
            if (why := self.learned.get((name, json.dumps(value, default=str)))):
                return why
        return None

    def summary(self) -> dict[str, int]:
        """Learned values, as name=value, with the trials that taught each."""
        return {f"{name}={json.loads(value)!r}": self.blamed[(name, value)]
                for name, value in self.learned}
