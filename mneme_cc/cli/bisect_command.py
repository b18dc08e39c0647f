"""`mneme bisect -rdb DIR [-rid ID] --config BAD.json`: which pass, transform or
ptxas level makes a configuration diverge from the recorded epilogue.

Every step is a verified replay. Exit status: 0 the configuration verifies,
1 a culprit was found, 2 an error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors

EXIT_DIVERGES = 1


@reports_errors
def bisect(
    database: Annotated[Path, typer.Option("-rdb", "--rdb", help="The record database.")],
    config_path: Annotated[Path, typer.Option(
        "--config", help="The ReplayConfig (JSON) that does not verify.")],
    rid: Annotated[Optional[str], typer.Option("-rid", "--rid", help="The instance.")] = None,
    device: Annotated[int, typer.Option(help="GPU ordinal.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Find the pass, transform or ptxas level that makes --config diverge."""
    from mneme_cc.cli._options import find_instance
    from mneme_cc.replay.config import ReplayConfig
    from mneme_cc.triage.bisect import Bisector

    inst = find_instance(database, rid, None)
    config = ReplayConfig.load(config_path)
    finding = Bisector(inst, config, device).run()
    if as_json or not sys.stdout.isatty():
        print(json.dumps({"instance": inst.name, "config": str(config_path),
                          **finding.to_dict()}, indent=2))
    else:
        from rich.console import Console
        from rich.syntax import Syntax

        console = Console()
        console.print(f"[bold]{inst.demangled}[/] {inst.name}, {config_path}")
        for step in finding.steps:
            mark = "[green]verified[/]" if step["verified"] else "[red]diverges[/]"
            console.print(f"  {step['config']}: {mark}")
        console.print(f"{finding.message} ({finding.replays} replays)")
        if finding.ir_diff:
            console.print(Syntax(finding.ir_diff, "diff"))
    if finding.stage != "none":
        raise typer.Exit(EXIT_DIVERGES)
