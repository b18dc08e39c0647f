"""What a study that verifies bit for bit runs: configurations that keep the
build's numerics (docs/numerics.md), ptxas levels pinned where pinning keeps
them; the rest are pruned as `numerics_changing` with the reason. What the
rules cannot tell before a configuration runs, a study learns from the
contraction probe's verdicts (LearnedNumerics)."""

from __future__ import annotations

import json
import zlib
from collections import Counter
from typing import Any

from mneme_cc.replay import outcome as oc
from mneme_cc.replay.compiling import ptx_kernel
from mneme_cc.replay.compiling.numerics import codegen_of, for_bitwise_study
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.tune.space import value_key


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
#: One in this many configurations with a learned value runs anyway (which
#: ones is drawn from their parameters): should one verify, the value is
#: unlearned.
RECHECK_EVERY = 16


class LearnedNumerics:
    """Parameter values a bitwise study found to change the numerics by
    running them: with fast contraction, which multiply-adds the back end
    fuses follows the code the pipeline leaves (no unrolling, or an `O1`
    pipeline, fuses other pairs than the build's `O3`), which no rule reads
    from a configuration. A numerics-changing trial (the contraction probe's
    verdict) blames the one value of it that no verified trial has had; a
    value blamed LEARNED_AFTER times and never verified is learned, and
    configurations with it are pruned as numerics-changing before they run,
    but for one in RECHECK_EVERY, which runs: a value a verified trial has is
    never learned, nor kept learned. A study that allows numerics changes,
    or verifies under per-buffer policies, learns nothing (`enabled`)."""

    def __init__(self, enabled: bool = True, after: int | None = None):
        self.enabled = enabled
        self.after = LEARNED_AFTER if after is None else after
        self.verified: set[tuple[str, Any]] = set()  # values of verified trials
        self.blamed: Counter[tuple[str, Any]] = Counter()
        self.learned: dict[tuple[str, Any], str] = {}  # -> the reason a configuration gets
        self._shown: dict[tuple[str, Any], str] = {}   # -> name=value as the user reads it

    def told(self, params: dict[str, Any], outcome: str, duplicate: bool = False) -> None:
        """A trial's outcome. A repeat of a configuration that ran counts
        as verified, never as blame (its run was blamed once already)."""
        if not self.enabled:
            return
        values = {(name, value_key(value)): (name, value) for name, value in params.items()}
        if outcome in oc.PASSED:
            self.verified.update(values)
            for value in values.keys() & self.learned.keys():
                del self.learned[value]
        elif outcome == oc.NUMERICS_CHANGING and not duplicate:
            suspects = values.keys() - self.verified
            if len(suspects) == 1:
                (value,) = suspects
                self.blamed[value] += 1
                name, raw = values[value]
                self._shown[value] = f"{name}={raw!r}"
                if self.blamed[value] >= self.after:
                    self.learned[value] = (
                        f"numerics-changing: {self._shown[value]} fused other multiply-adds "
                        f"than the build in {self.blamed[value]} trials where it was the only "
                        "value no verified trial had (the contraction probe)")

    def told_earlier(self, results: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """What a study held before this run (its trials' parameters and
        results, from every process): each configuration once."""
        seen = set()
        for params, result in results:
            if not isinstance(result, dict):  # a storage is not trusted
                continue
            key = json.dumps(result.get("config"), sort_keys=True, default=repr)
            self.told(params, result.get("outcome", ""), duplicate=key in seen)
            seen.add(key)

    def reason(self, params: dict[str, Any]) -> str | None:
        """Why a configuration with these parameters is not run, or None."""
        if not self.learned:
            return None
        for name, value in params.items():
            if (why := self.learned.get((name, value_key(value)))):
                # The same answer each time a configuration is asked about.
                drawn = zlib.crc32(json.dumps(params, sort_keys=True, default=repr).encode())
                return None if drawn % RECHECK_EVERY == 0 else why
        return None

    def summary(self) -> dict[str, int]:
        """Learned values, as name=value, with the trials that taught each."""
        return {self._shown[value]: self.blamed[value] for value in self.learned}
