"""`mneme-diff`: the same as `mneme diff`."""

from mneme_cc.cli import run_subcommand


def main() -> None:
    run_subcommand("diff")
