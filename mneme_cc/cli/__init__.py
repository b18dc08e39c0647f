"""The `mneme` command.

`mneme record` and `mneme run` wrap production runs, so they start without
importing the rest of the CLI (typer alone costs a tenth of a second); every
other subcommand goes through the typer app in `mneme_cc.cli.typer_app`.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["record"]:
        from mneme_cc.cli.record_command import main as record_main

        raise SystemExit(record_main(sys.argv[2:]))
    if sys.argv[1:2] == ["run"]:
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
