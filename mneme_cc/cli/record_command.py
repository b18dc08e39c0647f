"""`mneme record -rdb DIR [options] -- APP ARGS`: run an application under the recorder.

The command's options are typer's, as every command's (typer_app.record: its
help, and the parse of any other way in); a plain run is parsed here with
argparse, the same options, because `mneme record` runs in front of every
recorded production run and typer alone would cost it 30 ms
(tests/cli/test_cli.py checks the two agree).
"""

from __future__ import annotations

import argparse
import sys

#: As in mneme_cc.cli._errors (not imported: it pulls in typer).
EXIT_USAGE = 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mneme record",
        usage="mneme record -rdb DIR [options] -- APP [ARGS...]",
        description="Run APP with the recorder; selected kernel launches are stored in DIR.")
    p.add_argument("-rdb", "--rdb", dest="database", required=True, metavar="DIR",
                   help="the record database directory")
    p.add_argument("--kernels", metavar="REGEX",
                   help="record only kernels whose mangled or demangled name matches")
    p.add_argument("--skip", type=int, default=0, metavar="N",
                   help="warm-up launches to skip per kernel (default 0)")
    p.add_argument("--max-instances", type=int, default=4, metavar="M",
                   help="distinct instances to keep per kernel (default 4)")
    p.add_argument("--vass", metavar="SIZE",
                   help="size of the VA window, e.g. 256G (default: twice the device memory)")
    p.add_argument("--va-base", metavar="ADDRESS",
                   help="base address of the VA window (default 0x200000000000)")
    p.add_argument("--ranks", metavar="LIST", help="MPI ranks to record, e.g. 0,2-3 (default all)")
    p.add_argument("--chunk-size", metavar="SIZE", help="snapshot chunk size (default 1M)")
    p.add_argument("--zstd-level", type=int, metavar="L",
                   help="zstd level for stored chunks; 0 stores them raw (default 1)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="report each instance and where recording time went")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- APP [ARGS...]")
    return p


def main(argv: list[str]) -> int:
    return execute(parser().parse_args(argv))


def execute(args: argparse.Namespace) -> int:
    """Runs the application as the parsed options say; its exit status."""
    from pathlib import Path

    from mneme_cc.errors import MnemeError, UsageError
    from mneme_cc.record.launcher import RecordSettings, parse_size, run_recorded

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        base = None
        if args.va_base is not None:
            try:
                base = int(args.va_base, 0)
            except ValueError:
                raise UsageError(f"--va-base '{args.va_base}' is not an address "
                                 "(e.g. 0x200000000000)") from None
        settings = RecordSettings(
            database=Path(args.database), kernels=args.kernels, skip=args.skip,
            max_instances=args.max_instances,
            vass=parse_size(args.vass, "--vass") if args.vass else None, va_base=base,
            ranks=args.ranks,
            chunk_size=parse_size(args.chunk_size, "--chunk-size") if args.chunk_size else None,
            zstd_level=args.zstd_level, verbose=args.verbose)
        return run_recorded(settings, command)
    except MnemeError as exc:
        print(f"mneme: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
