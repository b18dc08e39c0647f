"""Files the user hands over or gets back: JSON objects read with one-line
errors, and writes that a reader sees whole (the old content or the new)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mneme_cc.errors import UsageError


def _parent_is_a_directory(path: Path) -> None:
    """A one-line UsageError naming the place, not a temporary or lock file
    beside path, when path's directory is missing or is not one."""
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{parent}: {'not a' if parent.exists() else 'no such'} directory, "
                         f"so {path.name} cannot be written there (create it or name another "
                         "place)")


def replaceable(path: Path) -> Path:
    """The file to rename a new one over in path's place: path, or the regular
    file a symbolic link at path names (the link stays). A one-line UsageError
    when path is there and is no regular file: renaming over a directory fails,
    and over a FIFO, a device or a socket (/dev/stdout) would take its place."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return path
    if stat.S_ISDIR(mode):
        raise UsageError(f"{path} is a directory: give a file name")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path} is not a regular file (a FIFO, a device or a socket), and "
                         "is written by renaming a new file over it: give a file name")
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def replaced_atomically(path: Path) -> Iterator[Path]:
    """A temporary name beside path (beside the file a link at path names) to
    write; once the block ends, it is renamed over that file, so a reader sees
    the old content or the new. A failed write (a full disk) leaves no
    temporary file behind."""
    _parent_is_a_directory(path)
    path = replaceable(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Writes text in path's place (`replaced_atomically`)."""
    with replaced_atomically(path) as tmp:
        tmp.write_text(text)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Holds an advisory lock on `.<name>.lock` beside path: writers that
    read, merge and rewrite one file take turns, so none loses another's
    entries."""
    _parent_is_a_directory(path)
    lock = path.with_name(f".{path.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


#: The most a JSON file mneme-cc reads may hold: far more than any it writes.
MAX_JSON_BYTES = 64 << 20


def regular_text(path: Path, what: str, limit: int | None = MAX_JSON_BYTES,
                 errors: str = "strict") -> str:
    """The text of path, which must be a regular file (a FIFO or a device
    would block a read or never end it) of at most `limit` bytes;
    FileNotFoundError when it is missing, a one-line UsageError otherwise
    (UnicodeDecodeError, a ValueError, for bytes that are not UTF-8 unless
    `errors` says what to do with them)."""
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise UsageError(f"{path}: a directory, not {what}")
        if not stat.S_ISREG(mode):
            raise UsageError(f"{path}: not a regular file, so not {what}")
        with path.open("rb") as f:
            raw = f.read(-1 if limit is None else limit + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    if limit is not None and len(raw) > limit:
        raise UsageError(f"{path}: more than {limit >> 20} MiB, not {what}")
    return raw.decode(errors=errors)


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in path (a file the user gave); a one-line UsageError if not."""
    try:
        data = json.loads(regular_text(Path(path), what))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not {what} (a JSON object)")
    return data
