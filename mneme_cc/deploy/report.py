"""What `mneme run --tuned` reports per kernel: launches served, launches
passed through and why, and the summed kernel time.

Each process of the application writes `serve-report.<pid>.json` at exit
(runtime/recorder/Server.cpp); they are merged here by kernel, and the
bundle's kernels that were never launched are listed too. The document
`--report FILE` writes is `RunReport.to_dict()` (docs/deploy.md).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mneme_cc.errors import UsageError
from mneme_cc.fileio import regular_text

FORMAT, VERSION = "mneme-run-report", 1
NOT_TUNED = "not tuned"


@dataclass
class KernelReport:
    kernel: str
    demangled: str
    tuned: bool
    launches: int = 0
    served: int = 0
    passed_through: dict[str, int] = field(default_factory=dict)  # reason -> launches
    served_ms: float = 0.0
    passed_through_ms: float = 0.0
    timed_launches: int = 0

    @property
    def kernel_ms(self) -> float | None:
        """The summed time of the timed launches; None when none was timed."""
        return self.served_ms + self.passed_through_ms if self.timed_launches else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kernel_ms": self.kernel_ms}


@dataclass
class RunReport:
    bundle: str
    match: str                      # "exact" or "nearest"
    command: list[str]
    exit_status: int
    kernels: list[KernelReport]
    time_all: bool = False
    processes: int = 0              # processes that wrote a report
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "bundle": self.bundle,
                "match": self.match, "command": self.command, "exit_status": self.exit_status,
                "kernel_time": "all" if self.time_all else "tuned", "processes": self.processes,
                "warnings": self.warnings, "kernels": [k.to_dict() for k in self.kernels]}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _ms(value: Any) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    return float(value) if ok else 0.0


def _merge(into: dict[str, KernelReport], raw: dict[str, Any]) -> None:
    name = raw.get("kernel")
    if not isinstance(name, str):
        return
    k = into.setdefault(name, KernelReport(name, str(raw.get("demangled") or name),
                                           bool(raw.get("tuned"))))
    k.launches += _count(raw.get("launches"))
    k.served += _count(raw.get("served"))
    passed = raw.get("passed_through")
    for why, n in (passed.items() if isinstance(passed, dict) else ()):
        k.passed_through[str(why)] = k.passed_through.get(str(why), 0) + _count(n)
    k.served_ms += _ms(raw.get("served_ms"))
    k.passed_through_ms += _ms(raw.get("passed_through_ms"))
    k.timed_launches += _count(raw.get("timed_served")) + _count(raw.get("timed_passed_through"))


def read_reports(directory: Path, tuned: dict[str, str]) -> tuple[list[KernelReport], int,
                                                                  list[str]]:
    """The merged per-kernel reports under directory, the number of processes
    that wrote one, and warnings about unreadable ones. `tuned`: the bundle's
    kernels (mangled -> demangled), listed even when never launched."""
    kernels: dict[str, KernelReport] = {}
    processes, warnings = 0, []
    for path in sorted(directory.glob("serve-report.*.json")):
        try:
            raw = json.loads(regular_text(path, "a serving report"))
            if not isinstance(raw, dict) or raw.get("format") != "mneme-serve-report" or \
                    not isinstance(raw.get("kernels"), list):
                raise ValueError("not a serving report")
        except (OSError, ValueError, UsageError) as exc:
            warnings.append(f"a process's report is unreadable ({exc}); its counts are missing")
            continue
        processes += 1
        for entry in raw["kernels"]:
            if isinstance(entry, dict):
                _merge(kernels, entry)
    for name, demangled in tuned.items():
        kernels.setdefault(name, KernelReport(name, demangled, True))
    # Tuned kernels first, then by time spent, then by launches.
    order = sorted(kernels.values(), key=lambda k: (not k.tuned, -(k.kernel_ms or 0),
                                                    -k.launches, k.demangled))
    return order, processes, warnings


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def format_report(report: RunReport) -> list[str]:
    """The report as lines of text, as `mneme run` prints it on stderr."""
    tuned = [k for k in report.kernels if k.tuned]
    served = sum(k.served for k in tuned)
    launched = sum(k.launches for k in tuned)
    lines = [f"mneme run: {served} of {launched} launch(es) of {len(tuned)} tuned kernel(s) "
             f"served from {report.bundle} (match {report.match}); "
             f"{len(report.kernels) - len(tuned)} other kernel(s) ran untouched"]
    if report.processes == 0:
        lines.append("mneme run: the application wrote no report (it ended without running "
                     "its exit handlers, or never started the CUDA runtime)")
    width = min(48, max([len("kernel")] + [len(k.demangled) for k in report.kernels]))
    lines.append(f"{'kernel':<{width}}  {'launches':>8}  {'served':>8}  {'kernel ms':>10}  "
                 "passed through")
    for k in report.kernels:
        ms = f"{k.kernel_ms:.3f}" if k.kernel_ms is not None else "-"
        why = "; ".join(f"{n} {reason}" for reason, n in sorted(
            k.passed_through.items(), key=lambda item: -item[1])) or "-"
        lines.append(f"{_short(k.demangled, width):<{width}}  {k.launches:>8}  {k.served:>8}  "
                     f"{ms:>10}  {why}")
    return lines
