"""`ReplayResult`: what one replay of a configuration found and measured."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from mneme_cc.replay import outcome as oc
from mneme_cc.replay.compiling.compiler import CompiledKernel
from mneme_cc.replay.compiling.cubin import Resources
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.judging.verify import Mismatch


def numerics_failure(numerics: list[str]) -> str:
    """What a failure whose configuration changes the numerics means, in one line."""
    return "numerics-changing: " + "; ".join(numerics)


@dataclass
class ReplayResult:
    config: ReplayConfig
    verified: bool
    mismatches: list[Mismatch]
    samples_ms: list[float]
    resources: Resources | None
    compile_seconds: dict[str, float] = field(default_factory=dict)
    cache_hit: bool = False
    occupancy: float = 0.0              # theoretical: resident warps / the SM's maximum
    max_threads_per_block: int = 0      # what the compiled kernel allows
    cubin_bytes: int = 0
    # Seconds spent replaying: load (module), restore, launch (first, verified), verify, time.
    replay_seconds: dict[str, float] = field(default_factory=dict)
    compiled: CompiledKernel | None = None  # the IR, PTX and cubin run; None for "original"
    # How the config's numerics differ from the build's (empty: they do not).
    numerics: list[str] = field(default_factory=list)
    # Buffers that differ from the recording only within their nondeterministic spread.
    nondeterministic: list[str] = field(default_factory=list)
    # A failure the contraction probe may explain, its variants not compiled
    # yet: `numerics` holds the rules' answer until Replayer.probe() runs it.
    probe_pending: bool = False

    def emit(self, directory) -> list[Path]:
        """Writes what was run (kernel.ll, kernel.ptx, kernel.cubin) into directory."""
        if self.compiled is None:
            return []
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files = {"kernel.ll": self.compiled.ir, "kernel.ptx": self.compiled.ptx,
                 "kernel.cubin": self.compiled.cubin}
        for name, content in files.items():
            path = directory / name
            path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
        return [directory / name for name in files]

    @property
    def outcome(self) -> str:
        if not self.verified:
            return oc.FAILED_VERIFICATION
        return oc.NONDETERMINISTIC if self.nondeterministic else oc.VERIFIED

    @property
    def failure(self) -> str | None:
        """What a failed verification means, in one line (None when it passed)."""
        if self.verified:
            return None
        if self.numerics:
            return numerics_failure(self.numerics)
        if self.config.pin_contraction:
            return ("pinned contraction: the application's ptxas fused multiply-adds that LLVM "
                    "left (mneme check's pinned column), or a miscompile (mneme bisect)")
        return ("the configuration keeps the build's numerics: a miscompile, a launch the "
                "kernel does not support, or an unexplained difference (mneme bisect)")

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.samples_ms)

    @property
    def stdev_ms(self) -> float:
        return statistics.stdev(self.samples_ms) if len(self.samples_ms) > 1 else 0.0
