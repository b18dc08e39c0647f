"""How commands end on a user mistake: one line on stderr, a non-zero exit."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer

from mneme_cc.errors import MnemeError

F = TypeVar("F", bound=Callable)

#: Exit status for usage and environment errors (bad input, missing tools).
EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    # One line, whatever the message quotes (a damaged file's bytes, LLVM's
    # multi-line diagnostics).
    message = re.sub(r"\s*\n\s*", " ", message.strip())
    print(f"mneme: error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def reports_errors(command: F) -> F:
    """Turns MnemeError and OSError from a command into `fail(...)`."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except MnemeError as exc:
            fail(str(exc))
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            fail(f"{where}{exc.strerror or exc}")

    return wrapper  # type: ignore[return-value]
