"""Which step of the compilation makes a replayed kernel's output diverge.

Given a configuration whose replay fails verification against the recorded
epilogue, every step below is a real replay, verified the same way:

0. Numerics. When the configuration changes the build's numerics
   (mneme_cc.replay.compiling.numerics: contraction mode, reassociation, ptxas's or the
   code generator's level against the build's), each such setting is put
   back as the build had it, alone; the one that makes it verify is named.
   A difference that only the pipeline's level explains is named too, as
   an expected rounding change rather than a miscompile.
1. The IR pipeline. A pass list: the shortest prefix that fails. A
   `default<On>` pipeline: the smallest LLVM -opt-bisect-limit that fails.
   The culprit is the pass at that position; the report shows the kernel's
   IR with the passes before it and with it too, as a unified diff.
2. When the kernel fails with no pass at all: mneme-cc's own transforms
   (argument specialisation, dimension specialisation, launch bounds,
   floating-point reassociation), each switched off alone.
3. Then ptxas: the lowest -O level that fails, with the transforms off.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from mneme_cc.errors import UsageError
from mneme_cc.replay.compiling import irtext
from mneme_cc.replay.compiling.llvm import pipeline_of
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running.device import DeviceError

_BISECT_LINE = re.compile(r"BISECT: (?:NOT )?running pass \((\d+)\) (.+?) on (.+)$")


@dataclass
class Finding:
    stage: str  # "numerics", "pass", "transform", "ptxas", "unexplained"; "none": nothing to find
    culprit: str | None              # the pass, transform or ptxas level
    position: int | None = None      # the pass's number in the pipeline (from 1)
    function: str | None = None      # what the pass ran on
    ir_diff: str = ""                # the kernel before and after the pass
    replays: int = 0
    steps: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _function_text(ir: str, name: str) -> str:
    """One function's definition, or the whole module when it is not found."""
    return irtext.function_text(ir, name) or ir


class Bisector:
    def __init__(self, instance, config: ReplayConfig, device: int = 0, cache_dir=None):
        if config.baseline is not None:
            raise UsageError("mneme bisect searches how mneme-cc compiled the kernel; a baseline "
                             "config compiles nothing")
        self.instance, self.config = instance, config
        self.device, self.cache_dir = device, cache_dir
        self.steps: list[dict[str, Any]] = []
        self.replayer = None

    # -- one verified replay per question -----------------------------------

    def _open(self):
        from mneme_cc.replay.running.replayer import Replayer

        if self.replayer is None:
            replayer = Replayer(self.instance, self.device, self.cache_dir)
            replayer.open()
            self.replayer = replayer
        return self.replayer

    def close(self) -> None:
        if self.replayer is not None:
            self.replayer.close()
            self.replayer = None

    def verifies(self, config: ReplayConfig, what: str) -> bool:
        config = dataclasses.replace(config, iterations=1, warmup=0)
        try:
            verified = self._open().replay(config).verified
        except DeviceError as exc:  # a fault: the context is gone, a fresh one follows
            self.close()
            verified, what = False, f"{what} ({exc.code or exc})"
        self.steps.append({"config": what, "verified": verified})
        return verified

    def _compile(self, config: ReplayConfig):
        from mneme_cc.replay.compiling.compiler import compile_instance

        return compile_instance(self.instance, config, self._open().device.arch, self.cache_dir)

    # -- the search ----------------------------------------------------------

    def run(self) -> Finding:
        try:
            if self.verifies(self.config, "the configuration as given"):
                return self._finding("none", None, message="nothing to find: the configuration "
                                     "verifies against the recorded epilogue")
            numerics = self._numerics()
            if numerics:
                return numerics
            pipeline = pipeline_of(self.config.pipeline)
            if pipeline.level is None:
                found = self._bisect_pass_list(pipeline.passes)
            else:
                found = self._bisect_opt_limit()
            return found or self._bisect_transforms_and_ptxas()
        finally:
            self.close()

    def _numerics(self) -> Finding | None:
        """Stage 0: a setting that changes the build's numerics, put back alone."""
        from mneme_cc.replay.compiling.numerics import changes, codegen_of

        kernel = self.instance.db.kernel(self.instance.static_hash)
        if not kernel.has_ir:
            return None
        codegen = codegen_of(kernel)
        found = dict(changes(self.config, codegen))
        if not found:
            return None
        reasons = "; ".join(found.values())
        restore = {"fp_contract": ("fp_contract", {"fp_contract": None}),
                   "fp_reassociate": ("fp_reassociate", {"fp_reassociate": False}),
                   "ptxas": ("ptxas contraction", {"pin_contraction": True}),
                   "codegen_level": ("code generation level",
                                     {"codegen_opt_level": codegen.level})}
        for code, (name, change) in restore.items():
            if code in found and self.verifies(dataclasses.replace(self.config, **change),
                                               f"{name} as the build had it"):
                return self._finding("numerics", name, message=(
                    f"a numerics change, not a miscompile: with {name} as the application's "
                    f"build had it the configuration verifies ({reasons})"))
        if set(found) == {"pipeline_level"}:
            return self._finding("numerics", "pipeline level", message=(
                f"{found['pipeline_level']}: rounding is expected to differ. mneme diff shows by "
                "how much (a few ULPs: contraction; more: look for a miscompile with a pass "
                "list)"))
        return None

    def _smallest_failing(self, low: int, high: int, fails) -> int:
        """The smallest n in (low, high] with fails(n), given not fails(low), fails(high)."""
        while high - low > 1:
            mid = (low + high) // 2
            if fails(mid):
                high = mid
            else:
                low = mid
        return high

    def _bisect_pass_list(self, passes: tuple[str, ...]) -> Finding | None:
        def prefix(n: int) -> ReplayConfig:
            return dataclasses.replace(self.config, pipeline=",".join(passes[:n]) or "none")

        if not passes or not self.verifies(prefix(0), "no pass"):
            return None
        n = self._smallest_failing(0, len(passes), lambda k: not self.verifies(
            prefix(k), f"the first {k} of {len(passes)} passes"))
        before, after = (self._compile(prefix(k)).ir for k in (n - 1, n))
        return self._pass_finding(passes[n - 1], n, self.instance.kernel_name, before, after)

    def _bisect_opt_limit(self) -> Finding | None:
        def limited(n: int) -> ReplayConfig:
            return dataclasses.replace(self.config, opt_bisect_limit=n)

        if not self.verifies(limited(0), "opt-bisect-limit 0 (no optional pass)"):
            return None
        log = self._compile(limited(1 << 30)).bisect_log.splitlines()
        passes = {int(m[1]): (m[2], m[3]) for m in map(_BISECT_LINE.match, log) if m}
        n = self._smallest_failing(0, max(passes), lambda k: not self.verifies(
            limited(k), f"opt-bisect-limit {k} of {max(passes)}"))
        name, target = passes[n]
        before, after = (self._compile(limited(k)).ir for k in (n - 1, n))
        function = target.strip("()") if not target.startswith("[") else None
        return self._pass_finding(name, n, function or self.instance.kernel_name, before, after,
                                  function)

    def _pass_finding(self, name, position, shown, before, after, function=None) -> Finding:
        diff = "".join(difflib.unified_diff(
            _function_text(before, shown).splitlines(keepends=True),
            _function_text(after, shown).splitlines(keepends=True),
            f"before {name}", f"after {name}"))
        return self._finding("pass", name, position=position, function=function or shown,
                             ir_diff=diff, message=f"pass {position}, {name}, is the first "
                             "whose output diverges from the recorded epilogue")

    def _bisect_transforms_and_ptxas(self) -> Finding:
        bare = dataclasses.replace(self.config, pipeline="none") \
            if pipeline_of(self.config.pipeline).level is None \
            else dataclasses.replace(self.config, opt_bisect_limit=0)
        transforms = {"specialize_args": (), "specialize_dims": False, "launch_bounds": False,
                      "fp_reassociate": False}
        for name, off in transforms.items():
            if getattr(bare, name) != off and \
                    self.verifies(dataclasses.replace(bare, **{name: off}), f"without {name}"):
                return self._finding("transform", name, message=f"mneme-cc's {name} makes "
                                     "the output diverge (it verifies without it)")
        plain = dataclasses.replace(bare, **transforms)
        level = plain.ptxas_opt_level
        if level > 0 and self.verifies(dataclasses.replace(plain, ptxas_opt_level=0),
                                       "ptxas -O0"):
            n = self._smallest_failing(0, level, lambda k: not self.verifies(
                dataclasses.replace(plain, ptxas_opt_level=k), f"ptxas -O{k}"))
            return self._finding("ptxas", f"ptxas -O{n}", position=n, message=f"ptxas -O{n} "
                                 "is the lowest level whose output diverges")
        return self._finding("unexplained", None, message="the kernel fails with no pass, no "
                             "transform and ptxas -O0: the launch (geometry, shared memory) or "
                             "the recorded IR itself, not an optimisation, makes it diverge")

    def _finding(self, stage: str, culprit: str | None, **fields) -> Finding:
        return Finding(stage, culprit, replays=len(self.steps), steps=list(self.steps), **fields)
