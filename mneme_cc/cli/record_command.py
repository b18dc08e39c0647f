"""`mneme record -rdb DIR [options] -- APP ARGS`: run an application under the recorder.

The work is the native launcher's (runtime/launcher: the options, the
database, the preload, the signals): a plain `mneme record` execs it at
once, so no interpreter stays between the user and the application and
recording's fixed start is the launcher's few milliseconds. The options and
`mneme record --help` are typer's, as every command's (typer_app.record
runs the launcher too, through mneme_cc.record.run_recorded;
tests/cli/test_cli.py checks both take the same flags).
"""

from __future__ import annotations

import os
import sys

#: As in mneme_cc.cli._errors (not imported: it pulls in typer).
EXIT_USAGE = 2


def launcher() -> str:
    """The native launcher's path; exits with a one-line error if it was not built.
    Found beside the recorder (build_info.launcher) without reading
    build_info.json: json and pathlib would double the entry point's start."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib",
                        "mneme-record")
    if not os.access(path, os.X_OK):
        print("mneme: error: the recorder was not built (the CUDA toolkit was missing when "
              "mneme-cc was installed): install it and reinstall mneme-cc", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    return str(path)


def main(argv: list[str]) -> int:
    """Replaces this process with the launcher; returns only if it cannot."""
    import signal

    path = launcher()
    # Python ignores these; the application gets them as the shell gave them.
    for name in ("SIGPIPE", "SIGXFSZ"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execv(path, ["mneme-record", *argv])
    except OSError as exc:
        print(f"mneme: error: cannot run the recorder's launcher {path}: {exc.strerror}",
              file=sys.stderr)
    return EXIT_USAGE
