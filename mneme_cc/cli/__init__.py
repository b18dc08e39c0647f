"""The `mneme` command.

Every subcommand is the typer app's (`mneme_cc.cli.typer_app`): its options
and help.  `mneme record` and `mneme run` wrap production runs, so a plain run
of either skips typer: `mneme record` execs its native launcher at once, and
`mneme run` parses its few options with argparse (their modules say why).
"""

from __future__ import annotations

import sys

#: The options of `mneme record` and `mneme run` that take no value.
_FLAGS = {"-v", "--verbose", "--time-kernels", "-q", "--quiet"}


def _asks_for_help(argv: list[str]) -> bool:
    """`--help` among mneme's own options: before `--` or the application
    (the first argument that is neither an option nor an option's value)."""
    takes_value = False
    for arg in argv:
        if takes_value:
            takes_value = False
        elif arg in ("-h", "--help"):
            return True
        elif arg == "--" or not arg.startswith("-"):
            return False
        else:
            takes_value = "=" not in arg and arg not in _FLAGS
    return False


def main() -> None:
    # A plain `mneme record`/`mneme run` skips typer; their help is typer's, as
    # every command's.
    if sys.argv[1:2] == ["record"] and not _asks_for_help(sys.argv[2:]):
        from mneme_cc.cli.record_command import main as record_main

        raise SystemExit(record_main(sys.argv[2:]))
    if sys.argv[1:2] == ["run"] and not _asks_for_help(sys.argv[2:]):
        from mneme_cc.cli.run_command import main as run_main

        raise SystemExit(run_main(sys.argv[2:]))
    invoke(sys.argv[1:])


def run_subcommand(name: str) -> None:
    """Entry point of a standalone `mneme-<name>` tool: `mneme <name> ...`."""
    invoke([name, *sys.argv[1:]], prog_name=f"mneme-{name}")


def _click_exceptions():
    """The exceptions of the click typer parses with (its own copy in newer typers)."""
    try:
        from typer._click import exceptions
    except ImportError:
        from click import exceptions
    return exceptions


def invoke(args: list[str], prog_name: str | None = None) -> None:
    """Runs the typer app; a command line it cannot parse (an unknown option, a
    bad value, a missing argument) is one line on stderr and exit status 2,
    as every other error of mneme's is, not typer's framed usage."""
    import typer

    from mneme_cc.cli.typer_app import app

    exceptions = _click_exceptions()
    try:
        code = app(args=args, prog_name=prog_name, standalone_mode=False)
    except exceptions.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare command: its help
            shown = exc.format_message()  # empty where rich has printed it already
            if shown.strip():
                print(shown)
            raise SystemExit(2) from None
        where = exc.ctx.command_path if exc.ctx is not None else (prog_name or "mneme")
        if prog_name and args:  # `mneme-export`, not `mneme-export export`
            where = where.replace(f"{prog_name} {args[0]}", prog_name, 1)
        message = " ".join(exc.format_message().split())
        print(f"mneme: error: {where}: {message} (`{where} --help` lists what it takes)",
              file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except exceptions.ClickException as exc:
        print(f"mneme: error: {' '.join(exc.format_message().split())}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        print("mneme: aborted", file=sys.stderr)
        raise SystemExit(1) from None
    raise SystemExit(code if isinstance(code, int) else 0)


def inspect_main() -> None:
    run_subcommand("inspect")


def replay_main() -> None:
    run_subcommand("replay")


def export_main() -> None:
    run_subcommand("export")


def diff_main() -> None:
    run_subcommand("diff")


def __getattr__(name: str):
    if name == "app":
        from mneme_cc.cli.typer_app import app

        return app
    raise AttributeError(name)
