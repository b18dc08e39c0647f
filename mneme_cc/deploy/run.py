"""Running an application with its tuned kernels served (`mneme run --tuned`).

The runtime of runtime/recorder is preloaded (ahead of the user's own
LD_PRELOAD entries) in serving mode: MNEME_SERVE names the serving table
(mneme_cc/deploy/serving.py), and nothing is recorded. The application's
output and exit status are its own; the report is read when it has ended.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from mneme_cc.deploy.report import RunReport, read_reports
from mneme_cc.errors import UsageError

MATCH_MODES = ("exact", "nearest")


@dataclass
class RunSettings:
    bundle: Path
    match: str = "exact"
    time_all: bool = False          # time every launch, not only the tuned kernels'
    report: Path | None = None      # where the JSON report goes

    def validate(self) -> None:
        """Raises:
            UsageError: an unknown match mode, a bundle path that is not a
                directory, a report path whose directory does not exist.
        """
        if self.match not in MATCH_MODES:
            raise UsageError(f"--match '{self.match}' is not one of {', '.join(MATCH_MODES)}")
        if not self.bundle.exists():
            raise UsageError(f"{self.bundle}: no such bundle directory (write one with "
                             "`mneme export --bundle DIR`)")
        if not self.bundle.is_dir():
            raise UsageError(f"{self.bundle}: not a directory (a bundle is a directory with "
                             "a manifest.json)")
        if self.report is not None:
            parent = self.report.parent
            if self.report.is_dir() or not parent.is_dir() or not os.access(parent, os.W_OK):
                raise UsageError(f"--report {self.report}: cannot be written (its directory "
                                 "must exist and be writable)")


def environment(table: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The application's environment: the runtime preloaded first, serving `table`."""
    from mneme_cc.record.launcher import with_runtime_preloaded

    env = with_runtime_preloaded(base)
    env["MNEME_SERVE"] = str(table)
    env.pop("MNEME_RDB", None)  # serving records nothing
    return env


def run_tuned(settings: RunSettings, command: list[str]) -> RunReport:
    """Runs command with the bundle's kernels served; the report carries its
    exit status (128+N for signal N).

    Raises:
        UsageError: no command, a missing or damaged bundle (one line naming
            the file), a program that cannot be run.
        ToolchainError: the runtime was not built.
    """
    from mneme_cc.deploy.bundle import load_bundle
    from mneme_cc.deploy.serving import write_table
    from mneme_cc.record.launcher import find_program, recorder_library, run_forwarding_signals

    if not command:
        raise UsageError("no application given: mneme run --tuned DIR -- APP [ARGS...]")
    settings.validate()
    bundle = load_bundle(settings.bundle)
    recorder_library()
    program = find_program(command[0], dict(os.environ))
    table = write_table(bundle, nearest=settings.match == "nearest",
                        time_all=settings.time_all)
    try:
        for warning in table.warnings:
            print(f"mneme: warning: {warning}", file=sys.stderr)
        status = run_forwarding_signals(command, environment(table.path), program)
        tuned = {e.kernel: e.demangled for e in bundle.entries}
        kernels, processes, warnings = read_reports(table.directory, tuned)
    finally:
        table.close()
    return RunReport(bundle=str(settings.bundle), match=settings.match, command=list(command),
                     exit_status=status, kernels=kernels, time_all=settings.time_all,
                     processes=processes, warnings=table.warnings + warnings)
