"""Where a study lives: an Optuna storage from what the user typed.

    None                     a journal file, <study dir>/study.log (the default)
    path/to/file.log         a journal file (also `journal:path`)
    sqlite:///path/study.db  an RDB storage; so is any SQLAlchemy URL:
    postgresql+psycopg2://user@host/db, mysql+pymysql://...

The default is a journal file, not SQLite: Optuna writes every suggested
parameter, user attribute and result as its own transaction, and through
SQLAlchemy and SQLite that capped a study near 25 trials per second on the
tuner's side alone, fewer than one GPU replays. A journal appends a line per
operation under a file lock (several processes on one host may share it) and
optuna-dashboard reads it as it reads a database. An RDB URL is what
processes on several hosts share.

The journal's appends are not fsync'ed: a study writes a line per suggested
parameter, and a sync per line held the tuner near 10 trials per second. A
killed process loses nothing (the lines are in the page cache); only a
machine that loses power may lose the last lines, and the study's own
trials.jsonl keeps every finished trial regardless.

The appends take an flock on the journal, not Optuna's symlink lock: that
lock costs a symlink and a rename-and-unlink per append, and a process that
finds it taken sleeps 1 ms, then 2, 4, ... before trying again, while the
tuner and its askers append several lines per trial each. An flock's waiter
wakes when it is released, and the kernel releases a killed process's. Where
the filesystem refuses flock, the symlink lock is taken as Optuna takes it.
Other Optuna writers of the journal (optuna-dashboard's notes, the optuna
command) take only the symlink lock: each of their appends is one write to
a file opened for appending, which a local filesystem keeps whole.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import weakref
from pathlib import Path
from typing import Any

from mneme_cc.errors import UsageError
from mneme_cc.tune import need_optuna

JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")


#: What flock raises where a filesystem does not support it (Lustre mounted
#: noflock, NFS without a lock service): there the symlink lock is taken.
NO_FLOCK = {errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL}


def _journal_backend(path: str):
    """Optuna's journal file backend, appending under an flock without a sync."""
    from optuna.storages.journal import JournalFileBackend

    class UnsyncedJournal(JournalFileBackend):
        def __init__(self, file_path: str):
            super().__init__(file_path)  # its symlink lock, where flock is refused
            self.journal_path = file_path
            self._appending: tuple[int, int, Any] | None = None  # pid, descriptor, closer
            self._flock = True

        def _descriptor(self) -> int:
            # One per process: an flock taken through a descriptor a fork
            # shares would exclude neither process.
            if self._appending is not None and self._appending[0] != os.getpid():
                self._close()  # a fork's copy: the parent's lock is not held through it
            if self._appending is None:
                fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
                # Also at exit, while os is there.
                self._appending = (os.getpid(), fd, weakref.finalize(self, os.close, fd))
            return self._appending[1]

        def _close(self) -> None:
            self._appending[2]()
            self._appending = None

        def _current(self, fd: int) -> bool:
            """Whether fd is still the file the journal's path names (not one
            deleted or replaced since, where a write would go unread)."""
            try:
                named = os.stat(self.journal_path)
            except FileNotFoundError:
                return False
            held = os.fstat(fd)
            return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)

        def _locked(self) -> int | None:
            """The journal's descriptor with its flock taken, or None where
            the filesystem refuses flock."""
            while True:
                fd = self._descriptor()
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except OSError as exc:
                    if exc.errno not in NO_FLOCK:
                        raise
                    self._flock = False
                    return None
                if self._current(fd):
                    return fd
                fcntl.flock(fd, fcntl.LOCK_UN)
                self._close()

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            data = memoryview("".join(json.dumps(log, separators=(",", ":")) + "\n"
                                      for log in logs).encode())
            fd = self._locked() if self._flock else None
            if fd is None:  # as Optuna appends, less its sync
                self._lock.acquire()
                try:
                    with open(self.journal_path, "ab") as journal:
                        journal.write(data)
                finally:
                    self._lock.release()
                return
            try:
                _write_all(fd, data)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    return UnsyncedJournal(path)


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data):]


def describe(url: str | None, study_dir: Path) -> str:
    """The storage as a string a user can pass back to --storage."""
    return url or str(study_dir / "study.log")


def open_storage(url: str | None, study_dir: Path):
    """An Optuna storage object; a one-line UsageError when it cannot be opened."""
    optuna = need_optuna()

    text = describe(url, study_dir)
    try:
        if "://" in text:
            # Long studies hold one connection; pre-ping survives a restarted server.
            return optuna.storages.RDBStorage(text, engine_kwargs={"pool_pre_ping": True})
        path = Path(text.removeprefix("journal:"))
        if not (text.startswith("journal:") or path.suffix in JOURNAL_SUFFIXES):
            raise UsageError(f"--storage {text}: not a storage: give a journal file "
                             f"(*{', *'.join(JOURNAL_SUFFIXES)}) or a URL such as "
                             "sqlite:///study.db or postgresql://user@host/db")
        path.parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(_journal_backend(str(path)))
    except UsageError:
        raise
    except ImportError as exc:  # a database driver is missing (Optuna wraps the cause)
        cause = exc.__cause__ or exc.__context__
        name = getattr(cause, "name", None) or exc.name or "the database's driver"
        package = {"psycopg2": "psycopg2-binary", "psycopg": "'psycopg[binary]'"}.get(name,
                                                                                     name)
        raise UsageError(f"--storage {text}: needs the Python package '{name}': "
                         f"pip install {package}") from None
    except Exception as exc:  # noqa: BLE001 - a bad URL or an unreachable server
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UsageError(f"--storage {text}: {type(exc).__name__}: {first}") from None
