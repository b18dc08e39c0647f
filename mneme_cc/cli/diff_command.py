"""`mneme diff [SAVED...] [-rdb DIR -rid ID] [--config X.json ...]`: what differs.

Two sides, A the reference: saved replay outputs (positional), replays of
--config files (on the fly), and, when only one side is given with -rdb, the
recorded epilogue as A. Exit status: 0 the same, 1 different, 2 an error.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors

EXIT_DIFFERENT = 1


def _number(x) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _table(a, b, diffs) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"A: {a.label}\nB: {b.label}")
    table = Table("buffer", "dtype", "bytes differ", "elements differ", "max abs", "max rel",
                  "max ulp", "NaN", "Inf", "±0")
    for d in diffs:
        style = "" if d.same else "red"
        table.add_row(d.name, d.dtype or "bytes", f"{d.bytes_differing}/{d.size}",
                      f"{d.differing}/{d.elements}" if d.dtype else "-", _number(d.max_abs),
                      _number(d.max_rel), _number(d.max_ulp), str(d.nan_mismatches),
                      str(d.inf_mismatches), str(d.signed_zeros), style=style)
    console.print(table)
    for d in diffs:
        if d.first:
            shown = ", ".join(f"[{f['index']}] {f['a']!r} -> {f['b']!r}" for f in d.first)
            console.print(f"{d.name}: {shown}")
        for h in d.histogram or []:
            console.print(f"  |a-b| in [{h['from']:.0e}, {h['to']:.0e}): {h['count']}")


@reports_errors
def diff(
    saved: Annotated[Optional[list[Path]], typer.Argument(
        help="Saved replay outputs (mneme replay --save-output DIR).")] = None,
    database: Annotated[Optional[Path], typer.Option("-rdb", "--rdb",
                                                     help="The record database.")] = None,
    rid: Annotated[Optional[str], typer.Option("-rid", "--rid", help="The instance.")] = None,
    config: Annotated[Optional[list[Path]], typer.Option(
        help="A ReplayConfig (JSON) to replay as a side; repeatable.")] = None,
    dtype: Annotated[Optional[str], typer.Option(
        help="float32 for every buffer, or KEY=dtype (arg:N, 0xADDRESS, a global), "
             "comma-separated; default: the verification policies, else bytes.")] = None,
    first: Annotated[int, typer.Option(help="Differing elements to show per buffer.")] = 8,
    histogram: Annotated[bool, typer.Option(help="Count errors per decade of |a - b|.")]
    = False,
    device: Annotated[int, typer.Option(help="GPU ordinal for --config sides.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Compare two device states of one instance: per buffer, bytes and elements."""
    from mneme_cc.errors import UsageError
    from mneme_cc.replay.config import ReplayConfig
    from mneme_cc.triage import diff as triage

    if first < 0:
        raise UsageError(f"--first {first}: give a count of elements (0 or more)")

    inst = None
    if database is not None:
        from mneme_cc.cli._options import find_instance

        inst = find_instance(database, rid, None)
    elif rid or config:
        raise UsageError("-rid and --config need -rdb DIR")
    sides = [triage.saved_side(p) for p in saved or []]
    configs = [(path, ReplayConfig.load(path)) for path in config or []]
    if inst is not None and len(sides) + len(configs) == 1:
        sides.insert(0, triage.recorded_side(inst))
    if len(sides) + len(configs) != 2:
        raise UsageError(f"mneme diff compares two sides; got {len(sides) + len(configs)} "
                         "(saved outputs, --config replays, and the recorded epilogue when "
                         "one side and -rdb are given)")
    if inst is None:
        inst = triage.instance_of(sides[0])
    all_configs = [s.config for s in sides] + [c for _, c in configs]
    dtypes = triage.resolve_dtypes(inst, dtype, all_configs)
    if configs and sides and sides[0].instance != inst.name:
        raise UsageError(f"{sides[0].label} is of instance {sides[0].instance}, not "
                         f"{inst.name}")
    with tempfile.TemporaryDirectory(prefix="mneme-diff-") as scratch:
        if configs:
            sides += triage.replayed_sides(inst, [(f"replay of {p}", c) for p, c in configs],
                                           Path(scratch), device)
        a, b = sides
        diffs = triage.diff(a, b, dtypes, first, histogram)
    same = all(d.same for d in diffs)
    if as_json or not sys.stdout.isatty():
        print(json.dumps({"a": a.label, "b": b.label, "instance": a.instance, "same": same,
                          "buffers": [d.to_dict() for d in diffs]}, indent=2))
    else:
        _table(a, b, diffs)
    if not same:
        raise typer.Exit(EXIT_DIFFERENT)
