"""`mneme-inspect`: the same as `mneme inspect`."""

from mneme_cc.cli import run_subcommand


def main() -> None:
    run_subcommand("inspect")
