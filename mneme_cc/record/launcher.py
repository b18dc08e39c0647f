"""Running an application under the recorder (`mneme record`).

The recorder is the native library from runtime/recorder, preloaded ahead of
the user's own LD_PRELOAD entries; it reads its settings from MNEME_*
variables, which `RecordSettings.environment()` derives from the flags.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from mneme_cc.build_info import build_info
from mneme_cc.errors import ToolchainError, UsageError

_SIZE = re.compile(r"^(\d+)\s*([kKmMgGtT]?)(i?B)?$")
_RANKS = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def parse_size(text: str, what: str) -> int:
    """'64G', '512M', '1048576' -> bytes."""
    m = _SIZE.match(text.strip())
    if not m:
        raise UsageError(f"{what} '{text}' is not a size (e.g. 64G, 512M)")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(m.group(1)) * scale


def recorder_library() -> Path:
    lib = build_info().recorder
    if lib is None or not lib.exists():
        raise ToolchainError("the recorder was not built (the CUDA toolkit was missing when "
                             "mneme-cc was installed): install it and reinstall mneme-cc")
    return lib


class RecordSettings:
    """`mneme record`'s options. A plain class: `mneme record` is on the path
    of every recorded run, and dataclasses would import `inspect` there."""

    def __init__(self, database: Path, kernels: str | None = None, skip: int = 0,
                 max_instances: int = 4, vass: int | None = None, va_base: int | None = None,
                 ranks: str | None = None, chunk_size: int | None = None,
                 zstd_level: int | None = None, verbose: bool = False):
        self.database = Path(database)
        self.kernels, self.skip, self.max_instances = kernels, skip, max_instances
        self.vass, self.va_base, self.ranks = vass, va_base, ranks
        self.chunk_size, self.zstd_level, self.verbose = chunk_size, zstd_level, verbose

    def __repr__(self) -> str:
        return f"RecordSettings({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    def validate(self) -> None:
        if self.kernels is not None:
            from mneme_cc import _native

            # The recorder's engine, not Python's: `(?i)x` is Python only.
            error = _native.regex_error(self.kernels)
            if error:
                raise UsageError(f"--kernels '{self.kernels}' is not a regex the recorder "
                                 f"reads (ECMAScript): {error}")
        if self.skip < 0 or self.max_instances < 1:
            raise UsageError("--skip must be >= 0 and --max-instances >= 1")
        if self.ranks is not None and (not _RANKS.match(self.ranks) or any(
                int(a) > int(b) for a, _, b in (r.partition("-") for r in self.ranks.split(","))
                if b)):
            raise UsageError(f"--ranks '{self.ranks}' is not a rank list (e.g. 0,2-3)")
        if self.va_base is not None and (self.va_base <= 0 or self.va_base % (2 << 20)
                                         or self.va_base >= 1 << 47):
            raise UsageError(f"--va-base {self.va_base:#x} is not a user-space address that "
                             "is a multiple of 2 MiB")
        if self.vass is not None and not 0 < self.vass < 1 << 63:
            raise UsageError(f"--vass {self.vass} is not a size of virtual address space "
                             "(more than 0, less than 2^63 bytes)")
        if self.zstd_level is not None and not 0 <= self.zstd_level <= 19:
            raise UsageError(f"--zstd-level {self.zstd_level} is not a zstd level (0, raw, to 19)")
        if self.chunk_size is not None and (self.chunk_size < 4096 or self.chunk_size % 8):
            raise UsageError("--chunk-size must be a multiple of 8, at least 4096")

    def prepare_database(self) -> None:
        """Creates the directory and checks it is writable, before the app starts."""
        try:
            self.database.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create the record database {self.database}: "
                             f"{exc.strerror}") from None
        if not os.access(self.database, os.W_OK | os.X_OK):
            raise UsageError(f"the record database {self.database} is not writable: "
                             "choose another -rdb directory")
        existing = self.database / "database.json"
        if any(self.database.iterdir()) and not existing.exists():
            raise UsageError(f"{self.database} is not empty and is not a record database: "
                             "choose another -rdb directory")
        # The database exists before the application starts, so it is readable
        # from its first moment on (the recorder opens the same one).
        from mneme_cc import _native

        try:
            _native.init_database(str(self.database))
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = with_runtime_preloaded(base)
        env["MNEME_RDB"] = str(self.database.resolve())
        values = {
            "MNEME_KERNELS": self.kernels,
            "MNEME_SKIP": self.skip,
            "MNEME_MAX_INSTANCES": self.max_instances,
            "MNEME_VASS": self.vass,
            "MNEME_VA_BASE": hex(self.va_base) if self.va_base is not None else None,
            "MNEME_RANKS": self.ranks,
            "MNEME_CHUNK_SIZE": self.chunk_size,
            "MNEME_ZSTD_LEVEL": self.zstd_level,
            "MNEME_VERBOSE": "1" if self.verbose else None,
        }
        for name, value in values.items():
            if value is not None:
                env[name] = str(value)
        return env


def run_recorded(settings: RecordSettings, command: list[str]) -> int:
    """Runs command under the recorder; returns its exit status (128+N for signal N).
    A run that adds no instance says why it may not have, on stderr."""
    if not command:
        raise UsageError("no application given: mneme record -rdb DIR -- APP [ARGS...]")
    settings.validate()
    env = settings.environment()
    program = find_program(command[0], env)
    settings.prepare_database()
    before = _instance_count(settings.database)
    if settings.verbose:  # the Python share of recording's fixed start
        print(f"mneme: {time.process_time() * 1000:.0f} ms of CPU in mneme record (Python, its "
              "imports, the checks) before the application starts", file=sys.stderr)
    code = run_forwarding_signals(command, env, program)
    if _instance_count(settings.database) == before:
        print(f"mneme: warning: recorded no instance: {_why_nothing(program)}", file=sys.stderr)
    return code


def _instance_count(database: Path) -> int:
    return sum(1 for _ in (database / "index").glob("*.json"))


def links_static_cuda_runtime(program: str) -> bool:
    """True for a program that carries the static CUDA runtime (libcudart_static)
    and loads no shared one: its launches never reach an interposed runtime."""
    try:
        with open(program, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(b"libcudart_static_") >= 0 and data.find(b"libcudart.so") < 0
    except (OSError, ValueError):
        return False


def _why_nothing(program: str) -> str:
    if links_static_cuda_runtime(program):
        return (f"{program} links the CUDA runtime statically and none of its launches "
                f"reached the recorder (it sees them through the driver's entry points, on "
                f"x86-64 Linux); the shared runtime is interposed directly (mneme-nvcc and "
                f"mneme-cxx link it; CMake: CUDA_RUNTIME_LIBRARY Shared; nvcc: -cudart shared)")
    return ("no kernel launch reached the recorder (none was launched, none matched "
            "--kernels, or --skip skipped them all)")


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
