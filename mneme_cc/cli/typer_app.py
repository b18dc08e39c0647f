"""The typer app behind `mneme`: one file per subcommand, joined here.

Heavy imports happen inside the commands so that `mneme --help` is instant.
"""

from __future__ import annotations

import argparse
import enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli import (
    bisect_command,
    check_command,
    compact_command,
    config_command,
    dataset_command,
    diff_command,
    doctor_command,
    export_command,
    inspect_command,
    ls_command,
    merge_command,
    replay_command,
    report_command,
    run_command,
    show_command,
    tune_command,
)

app = typer.Typer(
    name="mneme",
    help="Record GPU kernel launches and replay them as standalone experiments.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from mneme_cc.build_info import build_info

        info = build_info()
        print("\n".join([f"mneme-cc {info.version}", *info.describe()]))
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print mneme-cc's version and the LLVM and CUDA its plugin and "
                                      "recorder were built with."),
) -> None:
    """Record GPU kernel launches and replay them as standalone experiments."""


class Match(str, enum.Enum):
    exact = "exact"
    nearest = "nearest"


app.command("inspect")(inspect_command.inspect)
app.command("config")(config_command.config)
app.command("doctor")(doctor_command.doctor)
_PASS_THROUGH = {"allow_interspersed_args": False}
_APP = typer.Argument(metavar="-- APP [ARGS...]", show_default=False,
                      help="The application and its arguments, after --.")


@app.command("record", context_settings=_PASS_THROUGH)
def _record(
    database: Annotated[Path, typer.Option("-rdb", "--rdb", metavar="DIR",
                                           help="The record database directory.")],
    command: Annotated[Optional[list[str]], _APP] = None,
    kernels: Annotated[Optional[str], typer.Option(
        metavar="REGEX", help="Record only kernels whose mangled or demangled name matches.")] = None,
    skip: Annotated[int, typer.Option(metavar="N", help="Warm-up launches to skip per kernel.")] = 0,
    max_instances: Annotated[int, typer.Option(
        metavar="M", help="Distinct instances to keep per kernel.")] = 4,
    vass: Annotated[Optional[str], typer.Option(
        metavar="SIZE", help="Size of the VA window, e.g. 256G (default: twice the device "
                             "memory).")] = None,
    va_base: Annotated[Optional[str], typer.Option(
        metavar="ADDRESS", help="Base address of the VA window (default 0x200000000000).")] = None,
    ranks: Annotated[Optional[str], typer.Option(
        metavar="LIST", help="MPI ranks to record, e.g. 0,2-3 (default all).")] = None,
    chunk_size: Annotated[Optional[str], typer.Option(
        metavar="SIZE", help="Snapshot chunk size (default 1M).")] = None,
    zstd_level: Annotated[Optional[int], typer.Option(
        metavar="L", help="zstd level for stored chunks; 0 stores them raw, below 0 zstd's fast "
        "levels (default 1).")] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose",
                                          help="Report each instance and where recording "
                                               "time went.")] = False,
) -> None:
    """Run APP with the recorder; selected kernel launches are stored in DIR."""
    from mneme_cc.record.launcher import RecordSettings, run_recorded

    settings = RecordSettings(database, kernels=kernels, skip=skip,
                              max_instances=max_instances, vass=vass, va_base=va_base,
                              ranks=ranks, chunk_size=chunk_size, zstd_level=zstd_level,
                              verbose=verbose)
    raise typer.Exit(run_recorded(settings, command or []))


@app.command("run", context_settings=_PASS_THROUGH)
def _run(
    tuned: Annotated[Path, typer.Option(metavar="DIR",
                                        help="The bundle `mneme export --bundle DIR` wrote.")],
    command: Annotated[Optional[list[str]], _APP] = None,
    match: Annotated[Match, typer.Option(
        help="exact: only the recorded launch shapes; nearest: a launch at another shape runs "
             "the entry recorded nearest to it.")] = Match.exact,
    report: Annotated[Optional[Path], typer.Option(
        metavar="FILE", help="Also write the report as JSON to FILE.")] = None,
    time_kernels: Annotated[bool, typer.Option(
        "--time-kernels", help="Time every kernel's launches, not only the tuned kernels'.")] = False,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Print no report (warnings "
                                                                "still go to stderr).")] = False,
) -> None:
    """Run APP with its tuned kernels served from a bundle; the rest runs untouched.

    Each launch of a bundled kernel whose arch, IR and launch shape match runs the
    tuned cubin; nothing is recorded. The exit status is APP's.
    """
    raise typer.Exit(run_command.execute(argparse.Namespace(
        tuned=str(tuned), command=command or [], match=match.value,
        report=str(report) if report else None, time_kernels=time_kernels, quiet=quiet)))


app.command("ls")(ls_command.ls)
app.command("show")(show_command.show)
app.command("merge")(merge_command.merge)
app.command("compact")(compact_command.compact)
app.command("replay")(replay_command.replay)
app.command("tune")(tune_command.tune)
app.command("export")(export_command.export)
app.command("report")(report_command.report)
app.command("dataset")(dataset_command.dataset)
app.command("diff")(diff_command.diff)
app.command("bisect")(bisect_command.bisect)
app.command("check")(check_command.check)
