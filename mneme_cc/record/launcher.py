"""Running an application with the native runtime preloaded.

The recorder is the native library from runtime/recorder, preloaded ahead of
the user's own LD_PRELOAD entries; it reads its settings from MNEME_*
variables, which `mneme record`'s native launcher (runtime/launcher) derives
from its flags. `run_recorded` runs that launcher from Python; `mneme run`
uses the rest to serve a bundle.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from mneme_cc.build_info import build_info
from mneme_cc.errors import ToolchainError, UsageError


def recorder_library() -> Path:
    lib = build_info().recorder
    if lib is None or not lib.exists():
        raise ToolchainError(_NOT_BUILT)
    return lib


_NOT_BUILT = ("the recorder was not built (the CUDA toolkit was missing when mneme-cc was "
              "installed): install it and reinstall mneme-cc")


class RecordSettings:
    """`mneme record`'s options, for running it from Python; the native
    launcher checks them (runtime/launcher/RecordOptions.cpp). Sizes and the
    base address are numbers or what the command line takes ("256G", "0x...")."""

    def __init__(self, database: Path, kernels: str | None = None, skip: int = 0,
                 max_instances: int = 4, vass: int | str | None = None,
                 va_base: int | str | None = None,
                 ranks: str | None = None, chunk_size: int | str | None = None,
                 zstd_level: int | None = None, verbose: bool = False):
        self.database = Path(database)
        self.kernels, self.skip, self.max_instances = kernels, skip, max_instances
        self.vass, self.va_base, self.ranks = vass, va_base, ranks
        self.chunk_size, self.zstd_level, self.verbose = chunk_size, zstd_level, verbose

    def __repr__(self) -> str:
        return f"RecordSettings({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    def arguments(self) -> list[str]:
        """The launcher's command line for these settings (before `--`)."""
        given = {"--kernels": self.kernels, "--vass": self.vass,
                 "--va-base": hex(self.va_base) if isinstance(self.va_base, int)
                 else self.va_base,
                 "--ranks": self.ranks, "--chunk-size": self.chunk_size,
                 "--zstd-level": self.zstd_level}
        argv = ["-rdb", str(self.database), "--skip", str(self.skip),
                "--max-instances", str(self.max_instances)]
        argv += [f"{flag}={value}" for flag, value in given.items() if value is not None]
        return argv + (["-v"] if self.verbose else [])


def run_recorded(settings: RecordSettings, command: list[str]) -> int:
    """Runs command under the recorder, as `mneme record` does; returns its
    exit status (128+N for signal N).

    Raises:
        ToolchainError: the recorder was not built.
    """
    launcher = build_info().launcher
    if launcher is None or not launcher.exists():
        raise ToolchainError(_NOT_BUILT)
    # The launcher's own errors (a refused option, say) go to stderr, with status 2.
    return subprocess.run([str(launcher), *settings.arguments(), "--", *command]).returncode


def with_runtime_preloaded(base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment (default: this one) with the runtime preloaded ahead of
    the user's own LD_PRELOAD entries."""
    env = dict(os.environ if base is None else base)
    env["LD_PRELOAD"] = ":".join([str(recorder_library()), *filter(None, [env.get("LD_PRELOAD")])])
    return env


def find_program(name: str, env: dict[str, str]) -> str:
    """The executable `name` runs, searched in env's PATH as a shell would."""
    program = shutil.which(name, path=env.get("PATH"))
    if program is None:
        raise UsageError(f"{name}: no such program (or not executable)")
    return program


#: Signals `mneme record` passes on to the application instead of dying of them.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: si_code of a signal the kernel generated (a terminal's Ctrl-C, Ctrl-\\, hangup):
#: sent to the whole foreground process group, the application has it already.
_SI_KERNEL = 0x80


def run_forwarding_signals(argv: list[str], env: dict[str, str],
                           executable: str | None = None) -> int:
    """Runs the application; signals sent to `mneme record` reach it, and it
    decides what they mean. Returns its exit status (128+N for signal N)."""
    waited = {*FORWARDED, signal.SIGCHLD}
    # Blocked from before the start, so that none is lost or kills mneme; the
    # application starts with the mask it would have had.
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        try:
            # argv[0] stays as typed; `executable` is the file it names.
            proc = subprocess.Popen(argv, executable=executable, env=env,
                                    preexec_fn=lambda: signal.pthread_sigmask(
                                        signal.SIG_SETMASK, previous))
        except OSError as exc:
            raise UsageError(f"{argv[0]}: cannot run it: {exc.strerror}") from None
        while proc.poll() is None:
            info = signal.sigtimedwait(waited, 1.0)
            if info is None or info.si_signo == signal.SIGCHLD or info.si_code == _SI_KERNEL:
                continue
            try:
                proc.send_signal(info.si_signo)
            except ProcessLookupError:
                pass
        while signal.sigtimedwait(waited, 0) is not None:
            pass  # what arrived as it ended was the application's to handle
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
