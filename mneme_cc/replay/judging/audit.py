"""The fidelity audit behind `mneme check`: does replay compute what the
application computed, instance by instance?

Each instance is replayed with the application's own kernel (`original`),
with the recorded IR at the recorded settings (`ir`), and with the same IR
with its leftover multiply-adds pinned for ptxas (`pinned`, what a bitwise
study runs at other ptxas levels). A baseline is *bitwise*, *within the
nondeterministic spread* of buffers that differ between identical runs,
or *differs*, with `mneme diff`'s statistics per buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mneme_cc.replay import outcome as oc
from mneme_cc.replay.compiling.numerics import codegen_of
from mneme_cc.replay.config import ReplayConfig


@dataclass
class BaselineCheck:
    name: str                    # original, ir, pinned
    outcome: str                 # verified, nondeterministic, failed_verification, or an error
    median_ms: float | None = None
    differing: list[dict[str, Any]] = field(default_factory=list)  # buffer, count, max_ulp, ...
    error: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome in oc.PASSED


@dataclass
class InstanceCheck:
    instance: str
    kernel: str
    determinism: str             # deterministic, nondeterministic, unknown
    nondeterministic: list[dict[str, Any]]
    baselines: dict[str, BaselineCheck]
    assembler: str = ""               # what assembled the IR baselines
    assembler_note: str | None = None  # when it is not the application's ptxas

    @property
    def failed(self) -> bool:
        """An instance that the application's kernel or its IR at the recorded
        settings does not reproduce (the pinned variant informs; it decides nothing)."""
        return any(not b.passed for n, b in self.baselines.items() if n != "pinned")

    def ratio(self, name: str, reference: str) -> float | None:
        a, b = self.baselines.get(name), self.baselines.get(reference)
        if a and b and a.median_ms and b.median_ms:
            return a.median_ms / b.median_ms
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"instance": self.instance, "kernel": self.kernel,
                "determinism": self.determinism, "nondeterministic": self.nondeterministic,
                "baselines": {k: vars(v) for k, v in self.baselines.items()},
                "ir_over_original": self.ratio("ir", "original"),
                "pinned_over_ir": self.ratio("pinned", "ir"), "assembler": self.assembler,
                "assembler_note": self.assembler_note, "failed": self.failed}


def _differing(result) -> list[dict[str, Any]]:
    out = []
    for m in result.mismatches:
        stats = m.stats or {}
        out.append({"buffer": m.buffer, "count": m.count, "dtype": stats.get("dtype"),
                    "max_abs": stats.get("max_abs"), "max_rel": stats.get("max_rel"),
                    "max_ulp": stats.get("max_ulp")})
    return out


def check_instance(instance, *, iterations: int = 10, cache_dir=None) -> InstanceCheck:
    """Replays one instance with every baseline it has."""
    from mneme_cc.errors import MnemeError
    from mneme_cc.replay.compiling.compiler import application_assembler
    from mneme_cc.replay.judging.nondeterminism import load
    from mneme_cc.replay.running.replayer import Replayer

    kernel = instance.db.kernel(instance.static_hash)
    run = {"iterations": iterations, "warmup": 2}
    configs: dict[str, ReplayConfig] = {}
    if kernel.description.get("image"):
        configs["original"] = ReplayConfig(baseline="original", **run)
    if kernel.has_ir:
        configs["ir"] = ReplayConfig(baseline="ir", **run)
        configs["pinned"] = codegen_of(kernel).baseline_config(pin_contraction=True, **run)
    elif kernel.provenance == "ptx":
        configs["ptx"] = ReplayConfig(**run)  # the application's PTX, assembled here
    checks: dict[str, BaselineCheck] = {}
    with Replayer(instance, cache_dir=cache_dir) as replayer:
        for name, config in configs.items():
            try:
                result = replayer.replay(config)
            except MnemeError as exc:
                checks[name] = BaselineCheck(name, "error", error=str(exc))
                continue
            checks[name] = BaselineCheck(name, result.outcome, result.median_ms,
                                         _differing(result), result.failure or "")
    found = load(instance)
    state = found.state if found else "unknown"
    spreads = found.to_dict()["buffers"] if found else []
    assembler = application_assembler(kernel) if kernel.has_ir else None
    return InstanceCheck(instance.name, instance.demangled, state, spreads, checks,
                         assembler.name if assembler else "",
                         assembler.note() if assembler else None)
