"""`mneme-replay`: the same as `mneme replay`."""

from mneme_cc.cli import run_subcommand


def main() -> None:
    run_subcommand("replay")
