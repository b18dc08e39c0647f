"""`mneme run --tuned DIR [options] -- APP ARGS`: run an application with its
tuned kernels served from a bundle.

Typer's options and help (typer_app.run), and a plain run parsed here with
argparse, the same options, because its own start counts against the
application's time (tests/cli/test_cli.py checks the two agree).
"""

from __future__ import annotations

import argparse
import sys

#: As in mneme_cc.cli._errors (not imported: it pulls in typer).
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, as every other mistake
        print(f"mneme: error: {message} (see `mneme run --help`)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="mneme run",
        usage="mneme run --tuned DIR [options] -- APP [ARGS...]",
        description="Run APP with the runtime in serving mode: each launch of a bundled "
                    "kernel whose arch, IR and launch shape match runs the tuned cubin; "
                    "everything else runs untouched. Nothing is recorded. The exit status "
                    "is APP's.")
    p.add_argument("--tuned", required=True, metavar="DIR",
                   help="the bundle `mneme export --bundle DIR` wrote")
    p.add_argument("--match", choices=("exact", "nearest"), default="exact",
                   help="exact: only the recorded launch shapes (default); nearest: a launch "
                        "at another shape runs the entry recorded nearest to it")
    p.add_argument("--report", metavar="FILE", help="also write the report as JSON to FILE")
    p.add_argument("--time-kernels", action="store_true",
                   help="time every kernel's launches, not only the tuned kernels'")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print no report (warnings still go to stderr)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- APP [ARGS...]")
    return p


def main(argv: list[str]) -> int:
    return execute(parser().parse_args(argv))


def execute(args: argparse.Namespace) -> int:
    """Runs the application as the parsed options say; its exit status."""
    import json
    from pathlib import Path

    from mneme_cc.deploy.report import format_report
    from mneme_cc.deploy.run import RunSettings, run_tuned
    from mneme_cc.errors import MnemeError

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    settings = RunSettings(bundle=Path(args.tuned), match=args.match,
                           time_all=args.time_kernels,
                           report=Path(args.report) if args.report else None)
    try:
        report = run_tuned(settings, command)
    except MnemeError as exc:
        print(f"mneme: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.quiet:
        for line in format_report(report):
            print(line, file=sys.stderr)
    if settings.report is not None:
        from mneme_cc.fileio import write_text_atomic

        try:
            write_text_atomic(settings.report, json.dumps(report.to_dict(), indent=2) + "\n")
        except (OSError, MnemeError) as exc:
            # The application ran: its exit status stands.
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            print(f"mneme: error: {settings.report}: the report was not written ({why})",
                  file=sys.stderr)
    return report.exit_status
