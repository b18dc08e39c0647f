"""`mneme-export`: the same as `mneme export`."""

from mneme_cc.cli import run_subcommand


def main() -> None:
    run_subcommand("export")
