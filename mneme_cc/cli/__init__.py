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
    from mneme_cc.cli.typer_app import app

    app()


def run_subcommand(name: str) -> None:
    """Entry point of a standalone `mneme-<name>` tool: `mneme <name> ...`."""
    from mneme_cc.cli.typer_app import app

    app(args=[name, *sys.argv[1:]], prog_name=f"mneme-{name}")


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
