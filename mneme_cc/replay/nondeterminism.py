"""Nondeterministic outputs: buffers that differ between identical runs.

When a replay fails verification, the application's own kernel (or, when its
image was not stored, the IR at the recorded settings) runs again from the
same prologue, twice. A buffer whose content differs between those runs, or
between them and the recording, is nondeterministic (floating-point atomics,
races): it is reported with its spread, the largest absolute, relative and
ULP differences among the three versions, and verified from then on under a
tolerance derived from that spread (`TOLERANCE_FACTOR` times it), which a
per-buffer policy for the same buffer overrides. A replay that passes only
thanks to such a tolerance has the outcome `nondeterministic`.

The finding is stored beside the recording, `fidelity/<instance>.json` in the
database (docs/record-db.md), so that `mneme ls`, `mneme show`, `mneme check`
and every tuning process see it without running the kernel again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from mneme_cc.errors import RecordDBError
from mneme_cc.replay.compare import diff_buffer

RUNS = 2
TOLERANCE_FACTOR = 4
DIRECTORY = "fidelity"


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
        """The derived verification policy (None without a dtype)."""
        if self.dtype is None:
            return None
        policy: dict[str, Any] = {"dtype": self.dtype,
                                  "abs": TOLERANCE_FACTOR * (self.max_abs or 0.0),
                                  "rel": TOLERANCE_FACTOR * (self.max_rel or 0.0)}
        if self.max_ulp is not None:
            policy["ulp"] = max(2, TOLERANCE_FACTOR * self.max_ulp)
        return policy


@dataclass
class Nondeterminism:
    """What running the application's kernel again showed (no buffers: it is deterministic)."""

    reference: str              # "original" or "ir": what ran again
    runs: int
    buffers: list[Spread] = field(default_factory=list)

    @property
    def deterministic(self) -> bool:
        return not self.buffers

    def policies(self) -> dict[str, dict[str, Any]]:
        """Buffer name -> derived policy, for the buffers that have one."""
        return {s.buffer: p for s in self.buffers if (p := s.policy()) is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"format": "mneme-fidelity", "version": 1, "reference": self.reference,
                "runs": self.runs, "buffers": [asdict(s) for s in self.buffers]}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> Nondeterminism:
        try:
            if data.get("format") != "mneme-fidelity" or data.get("version") != 1:
                raise ValueError("not a version-1 fidelity record")
            buffers = [Spread(**s) for s in data["buffers"]]
            for s in buffers:
                if not isinstance(s.buffer, str) or not isinstance(s.differing, int):
                    raise ValueError("a buffer entry has the wrong types")
            return cls(str(data["reference"]), int(data["runs"]), buffers)
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordDBError(f"{where}: malformed ({exc}); delete it and replay again") \
                from None


def spread(name: str, versions: list, dtype: str | None) -> Spread | None:
    """The spread of one buffer over several versions (uint8 arrays), None if all agree."""
    pairs = [(a, b) for i, a in enumerate(versions) for b in versions[i + 1:]]
    stats = [diff_buffer(name, 0, a, b, dtype) for a, b in pairs]
    if all(s.same for s in stats):
        return None

    def worst(attr: str):
        values = [getattr(s, attr) for s in stats if getattr(s, attr) is not None]
        return max(values) if values else None

    differing = max(s.differing if dtype else s.bytes_differing for s in stats)
    return Spread(name, dtype, int(differing), worst("max_abs"), worst("max_rel"),
                  worst("max_ulp"))


def load(instance) -> Nondeterminism | None:
    """The stored finding for an instance, None if it was never looked for."""
    data = instance.fidelity()
    if data is None:
        return None
    return Nondeterminism.from_dict(data, f"{instance.db.path / DIRECTORY / instance.name}.json")


def store(instance, finding: Nondeterminism) -> None:
    """Writes the finding into the database (whole or not at all)."""
    from mneme_cc.fileio import write_text_atomic

    directory = instance.db.path / DIRECTORY
    directory.mkdir(exist_ok=True)
    write_text_atomic(directory / f"{instance.name}.json",
                      json.dumps(finding.to_dict(), indent=2) + "\n")
