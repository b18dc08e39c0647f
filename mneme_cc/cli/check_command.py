"""`mneme check -rdb DIR`: the fidelity audit (mneme_cc.replay.judging.audit)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors
from mneme_cc.cli._progress import progress

#: Exit status when the application's kernel or its IR does not reproduce an instance.
EXIT_NOT_REPRODUCED = 1


def _cell(check) -> str:
    from mneme_cc.replay import outcome as oc

    if check is None:
        return "-"
    if check.outcome == oc.VERIFIED:
        return "bitwise"
    if check.outcome == oc.NONDETERMINISTIC:
        return "within spread"
    if check.outcome == "error":
        return f"error: {check.error}"
    worst = [f"{d['buffer']}: {d['count']} differ"
             + (f", max ulp {d['max_ulp']}" if d.get("max_ulp") is not None else "")
             for d in check.differing[:2]]
    return "differs (" + "; ".join(worst) + ")"


def _ratio(value: float | None) -> str:
    return f"{value:.3f}" if value else "-"


@reports_errors
def check(
    database: Annotated[Path, typer.Option("-rdb", "--rdb", help="The record database.")],
    kernel: Annotated[Optional[str], typer.Option(help="Only this kernel's instances.")] = None,
    iterations: Annotated[int, typer.Option(help="Timed launches per baseline.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Replay every instance with the application's kernel and with its IR at the
    recorded settings: bitwise, within a nondeterministic spread, or different.
    A table on a terminal, JSON when piped or with --json."""
    from mneme_cc.errors import UsageError
    from mneme_cc.record.db import RecordDB
    from mneme_cc.replay import outcome as oc
    from mneme_cc.replay.judging.audit import check_instance

    if iterations < 1:
        raise UsageError("--iterations must be at least 1")
    db = RecordDB(database)
    instances = db.kernel(kernel).instances if kernel else db.instances
    instances = [i for i in instances if i.replayable]
    if not instances:
        raise UsageError(f"no replayable instance in {database} (`mneme ls` says why)")
    rows = []
    with progress(len(instances), "checking instances") as step:
        for inst in instances:
            rows.append(check_instance(inst, iterations=iterations))
            step()
    failed = [r for r in rows if r.failed]
    totals = {
        "instances": len(rows),
        "bitwise": sum(all(b.outcome == oc.VERIFIED for b in r.baselines.values()) for r in rows),
        "nondeterministic": sum(r.determinism == "nondeterministic" and not r.failed
                                for r in rows),
        "failed": len(failed),
    }
    if as_json or not sys.stdout.isatty():
        print(json.dumps({"database": str(database), "totals": totals,
                          "instances": [r.to_dict() for r in rows]}, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        # "ptx": kernels without IR, their PTX assembled here.
        ptx = ["ptx"] if any("ptx" in r.baselines for r in rows) else []
        table = Table("instance", "kernel", "original", "ir", "pinned", *ptx, "ir/original",
                      "pinned/ir", box=None, pad_edge=False)
        for r in rows:
            b = r.baselines
            table.add_row(r.instance, r.kernel, _cell(b.get("original")), _cell(b.get("ir")),
                          _cell(b.get("pinned")), *[_cell(b.get(n)) for n in ptx],
                          _ratio(r.ratio("ir", "original")), _ratio(r.ratio("pinned", "ir")))
        console = Console()
        console.print(table)
        for note in dict.fromkeys(r.assembler_note for r in rows if r.assembler_note):
            console.print(f"note: {note}")
        console.print(f"{totals['instances']} instance(s): {totals['bitwise']} bitwise with "
                      f"every baseline, {totals['nondeterministic']} nondeterministic within "
                      f"their spread, {totals['failed']} not reproduced")
    if failed:
        raise typer.Exit(EXIT_NOT_REPRODUCED)
