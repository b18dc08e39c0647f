"""The typer app behind `mneme`: one file per subcommand, joined here.

Heavy imports happen inside the commands so that `mneme --help` is instant.
"""

from __future__ import annotations

import typer

from mneme_cc.cli import (
    bisect_command,
    check_command,
    config_command,
    dataset_command,
    diff_command,
    export_command,
    inspect_command,
    ls_command,
    record_command,
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

        print(f"mneme-cc {build_info().version}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print mneme-cc's version and exit."),
) -> None:
    """Record GPU kernel launches and replay them as standalone experiments."""


app.command("inspect")(inspect_command.inspect)
app.command("config")(config_command.config)
def _record(ctx: typer.Context) -> None:
    """Run APP with the recorder; selected kernel launches are stored in DIR.

    mneme record -rdb DIR [--kernels REGEX] [--skip N] [--max-instances M]
    [--vass SIZE] [--va-base ADDRESS] [--ranks LIST] [-v] -- APP [ARGS...]
    (`mneme record --help` lists every option.)
    """
    raise typer.Exit(record_command.main(list(ctx.args)))


app.command("record", add_help_option=False, context_settings={
    "allow_interspersed_args": False, "ignore_unknown_options": True,
    "allow_extra_args": True})(_record)


def _run(ctx: typer.Context) -> None:
    """Run APP with its tuned kernels served from a bundle; the rest runs untouched.

    mneme run --tuned DIR [--match exact|nearest] [--report FILE] [--time-kernels]
    [-q] -- APP [ARGS...]   (`mneme run --help` lists every option.)
    """
    raise typer.Exit(run_command.main(list(ctx.args)))


app.command("run", add_help_option=False, context_settings={
    "allow_interspersed_args": False, "ignore_unknown_options": True,
    "allow_extra_args": True})(_run)
app.command("ls")(ls_command.ls)
app.command("show")(show_command.show)
app.command("replay")(replay_command.replay)
app.command("tune")(tune_command.tune)
app.command("export")(export_command.export)
app.command("report")(report_command.report)
app.command("dataset")(dataset_command.dataset)
app.command("diff")(diff_command.diff)
app.command("bisect")(bisect_command.bisect)
app.command("check")(check_command.check)
