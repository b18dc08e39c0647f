"""Nondeterministic outputs: buffers that differ between identical runs.

When a replay fails verification, the application's own kernel (or, when its
image was not stored, the IR at the recorded settings) runs again from the
same prologue, `RUNS` times. A buffer whose content differs between those
runs is nondeterministic (floating-point atomics, races): it is reported
with its spread, the largest absolute, relative and ULP differences among
the runs and the recording, and verified from then on under a tolerance
derived from that spread (`TOLERANCE_FACTOR` times it), which a per-buffer
policy for the same buffer overrides. A buffer that the runs reproduce
among themselves but not as recorded is run `MORE_RUNS` times more (a
quiet GPU can schedule a kernel's atomics alike a few times running);
if they still agree it is no nondeterminism: it stays a failure, and the
instance is marked "not reproduced". A replay that passes only thanks to
such a tolerance has the outcome `nondeterministic`.

The finding is stored beside the recording, `fidelity/<instance>.json` in the
database (docs/record-db.md), so that `mneme ls`, `mneme show`, `mneme check`
and every tuning process see it without running the kernel again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from mneme_cc.errors import RecordDBError
from mneme_cc.replay.judging.compare import diff_buffer

RUNS = 3
#: Runs more before the application's own kernel is said not to reproduce
#: the recording.
MORE_RUNS = 8
TOLERANCE_FACTOR = 4
#: A spread wider than this many ULPs is no rounding difference: no ULP bound.
MAX_ULP = 1 << 16


@dataclass(frozen=True)
class Spread:
    """How far identical runs of the application's kernel disagree on one buffer."""

    buffer: str                 # "allocation 0x...", or a global's name
    dtype: str | None           # None: compared as bytes (no tolerance can be derived)
    differing: int              # elements (bytes without a dtype) that differ in any pair
    max_abs: float | None = None
    max_rel: float | None = None
    max_ulp: int | None = None

    def policy(self) -> dict[str, Any] | None:
        """The derived verification policy (None without a dtype). A relative
        spread against a recorded zero is infinite and bounds nothing: left out."""
        if self.dtype is None:
            return None
        policy: dict[str, Any] = {"dtype": self.dtype,
                                  "abs": TOLERANCE_FACTOR * (self.max_abs or 0.0)}
        if self.max_rel is not None and math.isfinite(self.max_rel):
            policy["rel"] = TOLERANCE_FACTOR * self.max_rel
        if self.max_ulp is not None and self.max_ulp <= MAX_ULP:
            policy["ulp"] = max(2, TOLERANCE_FACTOR * self.max_ulp)
        return policy


@dataclass
class Nondeterminism:
    """What running the application's kernel again showed (no buffers: it is deterministic)."""

    reference: str              # "original" or "ir": what ran again
    runs: int
    buffers: list[Spread] = field(default_factory=list)
    # Buffers the runs agree on among themselves but not with the recording:
    # the application's own kernel does not reproduce it.
    unreproduced: list[str] = field(default_factory=list)

    @property
    def deterministic(self) -> bool:
        return not self.buffers

    @property
    def state(self) -> str:
        if self.buffers:
            return "nondeterministic"
        return "not reproduced" if self.unreproduced else "deterministic"

    def policies(self) -> dict[str, dict[str, Any]]:
        """Buffer name -> derived policy, for the buffers that have one."""
        return {s.buffer: p for s in self.buffers if (p := s.policy()) is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"format": "mneme-fidelity", "version": 1, "reference": self.reference,
                "runs": self.runs, "buffers": [asdict(s) for s in self.buffers],
                "unreproduced": list(self.unreproduced)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> Nondeterminism:
        try:
            if data.get("format") != "mneme-fidelity" or data.get("version") != 1:
                raise ValueError("not a version-1 fidelity record")
            buffers = [Spread(**s) for s in data["buffers"]]
            for s in buffers:
                _check_spread(s)
            unreproduced = data.get("unreproduced", [])
            if not isinstance(unreproduced, list) or \
                    not all(isinstance(b, str) for b in unreproduced):
                raise ValueError("'unreproduced' is not a list of buffer names")
            return cls(str(data["reference"]), int(data["runs"]), buffers, unreproduced)
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordDBError(f"{where}: malformed ({exc}); delete it and replay again") \
                from None


def _check_spread(s: Spread) -> None:
    def number(x, kind) -> bool:
        return x is None or (isinstance(x, kind) and not isinstance(x, bool))

    if not isinstance(s.buffer, str) or not number(s.differing, int) or \
            not number(s.max_abs, (int, float)) or not number(s.max_rel, (int, float)) or \
            not number(s.max_ulp, int) or (s.dtype is not None and s.dtype not in _DTYPES):
        raise ValueError(f"the entry for {s.buffer!r} has fields of the wrong types")


_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64")


def runs_agree(runs: list) -> bool:
    """Whether every run left one buffer (uint8 arrays) with the same bytes."""
    return all((run == runs[0]).all() for run in runs[1:])


def spread(name: str, recorded, runs: list, dtype: str | None) -> Spread | None:
    """The spread of one buffer (uint8 arrays) over the runs and the recording;
    None when the runs agree among themselves (deterministic, right or wrong)."""
    if runs_agree(runs):
        return None
    versions = [recorded, *runs]
    pairs = [(a, b) for i, a in enumerate(versions) for b in versions[i + 1:]]
    stats = [diff_buffer(name, 0, a, b, dtype) for a, b in pairs]

    def worst(attr: str):
        values = [getattr(s, attr) for s in stats if getattr(s, attr) is not None]
        return max(values) if values else None

    def finite(x):  # JSON has no infinity; an unbounded spread bounds nothing anyway
        return x if x is None or math.isfinite(x) else None

    differing = max(s.differing if dtype else s.bytes_differing for s in stats)
    return Spread(name, dtype, int(differing), finite(worst("max_abs")),
                  finite(worst("max_rel")), worst("max_ulp"))


def found(reference: str, recorded: dict[str, Any], dtypes: dict[str, str | None],
          runs: list[dict[str, Any]],
          more: Callable[[int], list[dict[str, Any]]]) -> Nondeterminism:
    """The finding from runs (each: buffer name -> its bytes) against the
    recorded bytes of each buffer, asking `more(MORE_RUNS)` for further runs
    while some buffer looks not reproduced."""
    def judged(runs: list[dict[str, Any]]) -> Nondeterminism:
        buffers, unreproduced = [], []
        for name, expected in recorded.items():
            outputs = [run[name] for run in runs if name in run]
            if len(outputs) != len(runs):
                continue
            if spread_found := spread(name, expected, outputs, dtypes.get(name)):
                buffers.append(spread_found)
            elif (outputs[0] != expected).any():
                unreproduced.append(name)
        return Nondeterminism(reference, len(runs), buffers, unreproduced)

    finding = judged(runs)
    if finding.unreproduced:
        finding = judged(runs + more(MORE_RUNS))
    return finding


def load(instance) -> Nondeterminism | None:
    """The stored finding for an instance, None if it was never looked for."""
    data = instance.fidelity()
    if data is None:
        return None
    return Nondeterminism.from_dict(data, str(instance.fidelity_path))


def store(instance, finding: Nondeterminism) -> None:
    """Writes the finding into the database (whole or not at all)."""
    from mneme_cc.fileio import write_text_atomic

    instance.fidelity_path.parent.mkdir(exist_ok=True)
    write_text_atomic(instance.fidelity_path, json.dumps(finding.to_dict(), indent=2) + "\n")
