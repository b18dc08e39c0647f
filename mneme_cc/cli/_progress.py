"""A progress bar for long commands: on a terminal (stderr) only; piped
output gets nothing extra."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress(total: int, what: str) -> Iterator[Callable[[], None]]:
    """Yields `step()`, to call once per item done; a bar only when stderr is a
    terminal and there is more than one item."""
    if total <= 1 or not sys.stderr.isatty():
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda: bar.advance(task)
