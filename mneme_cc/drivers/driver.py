"""mneme-cc / mneme-cxx: clang, plus what makes a CUDA build recordable.

Every argument reaches clang unchanged and in order.  For a command that
compiles CUDA, the driver puts its own flags *before* the user's (so the
user's win): the toolkit, a default arch, the pass plugin, silence for the
CUDA-version warning and, when the toolkit lacks cuRAND, a stand-in header.
For a link that involves CUDA code it links the shared CUDA runtime, which
the recorder interposes, in place of the static one; a link of relocatable
device code also gets clang's device link and the IR linked from all its
objects (rdc_link.py), and a compile-and-link of it is split into compiles
and that link (rdc_compile.py).  Anything else runs exactly as clang would
run it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mneme_cc.drivers import device_link, rdc_compile, rdc_link, toolchain
from mneme_cc.drivers.invocation import OBJECT_SUFFIXES, TAKES_VALUE, Invocation, analyse
from mneme_cc.drivers.rdc_link import OFFLOAD_SECTION
from mneme_cc.errors import MnemeError, UsageError


def _links_cuda_code(inv: Invocation) -> bool:
    """True if the link pulls in CUDA code, which needs the CUDA runtime."""
    if inv.cuda_inputs or inv.names_cudart:
        return True
    from mneme_cc.drivers.elf import has_section

    for path in rdc_link.link_inputs(inv.expanded_args, inv.inputs):
        if path.endswith(OBJECT_SUFFIXES) and Path(path).is_file():
            try:
                if has_section(path, ".nv_fatbin") or has_section(path, OFFLOAD_SECTION):
                    return True
            except (MnemeError, OSError):
                continue  # not ours to diagnose: clang will
    return False


def _cuda_compile_flags(inv: Invocation, clang: str) -> list[str]:
    toolkit = toolchain.require_cuda_toolkit()
    wants_plugin = not inv.preprocess_only and not inv.names_plugin
    flags = toolchain.cuda_compile_flags(
        toolkit, toolchain.require_plugin(clang) if wants_plugin else None,
        cuda_path=not inv.names_cuda_path)
    archs = inv.archs if inv.names_arch else toolchain.default_cuda_archs()
    if not inv.names_arch:
        flags += [f"--cuda-gpu-arch={arch}" for arch in archs]
    if not inv.names_cuda_feature:
        flags += toolchain.ptx_feature_flags(archs, toolkit)
    return flags


def _with_shared_cudart(args: list[str]) -> list[str]:
    """The user's link arguments with the static CUDA runtime swapped out."""
    swapped = ["-lcudart" if a == "-lcudart_static" or a.endswith("libcudart_static.a") else a
               for a in args]
    swapped = ["cudart" if a == "cudart_static" and prev == "-l" else a
               for prev, a in zip([""] + swapped[:-1], swapped, strict=True)]
    return swapped + toolchain.cuda_link_flags(toolchain.require_cuda_toolkit())


@dataclass
class Command:
    """The clang command to run, and a scratch directory to remove after it.

    A one-command build of relocatable device code runs `steps` (its
    compiles) first, and plans its link, `deferred_link`, once they have
    made the objects whose IR the link reads.
    """

    argv: list[str]
    scratch: Path | None = None
    steps: list[list[str]] = field(default_factory=list)
    deferred_link: list[str] | None = None
    language: str = "c++"


def build_command(language: str, args: list[str]) -> Command:
    """The clang command for `mneme-cc` ("c") or `mneme-cxx` ("c++").

    Raises:
        MnemeError: the toolchain or a setting does not allow the build, or
            the device IR of relocatable objects cannot be linked.
    """
    clang = toolchain.select_clang()
    mode = ["--driver-mode=g++"] if language == "c++" else []
    inv = analyse(args)
    if not inv.inputs:  # --version, -print-*, -v alone: nothing to change
        return Command([clang, *mode, *args])
    if rdc_compile.splittable(inv.expanded_args, inv.inputs, inv.cuda_inputs, inv.links):
        scratch = Path(tempfile.mkdtemp(prefix="mneme-rdc-"))
        compiles, link = rdc_compile.split(inv.expanded_args, inv.inputs, TAKES_VALUE, scratch)
        try:
            steps = [build_command(language, c).argv for c in compiles]
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return Command([], scratch, steps, link, language)
    extra = _cuda_compile_flags(inv, clang) if inv.cuda_inputs else []
    if not (inv.links and _links_cuda_code(inv)):
        return Command([clang, *mode, *extra, *args])
    args, link_extra, scratch = device_link.in_link(inv, clang)
    return Command([clang, *mode, *extra, *_with_shared_cudart(args), *link_extra], scratch)


def device_link_command(args: list[str], output: str) -> Command:
    """`nvcc -dlink`'s commands: `output` registers the device code of the
    inputs in `args` (device_link.standalone)."""
    steps, argv, scratch = device_link.standalone(args, output, toolchain.select_clang())
    return Command(argv, scratch, steps)


def clang_command(language: str, args: list[str]) -> list[str]:
    """The full clang command line of a build that is one clang command.

    Raises:
        MnemeError: as build_command.
        UsageError: the build is not one command: a link of relocatable
            device code (its linked module lives in a scratch directory
            only while the link runs) or a one-command build of it (a
            compile per source, then that link); `build_command` and
            `execute` run those.
    """
    command = build_command(language, args)
    if command.scratch is not None:
        shutil.rmtree(command.scratch, ignore_errors=True)
        raise UsageError("clang_command: a build of relocatable device code is more than one "
                         "clang command; run it with build_command and execute")
    return command.argv


def _finish(code: int) -> None:
    sys.exit(code if code >= 0 else 128 - code)  # a signal: the shell's status


class _Children:
    """Runs the driver's children one at a time.

    A SIGINT, SIGTERM or SIGHUP sent to the driver (make stopped, a CI job
    cancelled) is passed on to the child running then, and no further child
    starts, so the driver lives on to remove its scratch directories.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self.stopped = 0

    def install(self) -> None:
        """Takes the signals over (before the driver makes scratch directories)."""
        for signum in self.SIGNALS:
            signal.signal(signum, self.handle)

    def handle(self, signum: int, _frame: object) -> None:
        self.stopped = signum
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def call(self, argv: list[str]) -> int:
        if self.stopped:
            return -self.stopped
        self.child = subprocess.Popen(argv)
        try:
            if self.stopped:  # the signal came as the child started
                self.child.send_signal(self.stopped)
            return self.child.wait()
        finally:
            self.child = None


def _run_children(command: Command, tool: str, children: _Children) -> tuple[int, Path | None]:
    """(the exit status, the link's scratch directory) of a command run as children."""
    for step in command.steps:
        code = children.call(step)
        if code != 0:
            return code, None
    argv, link_scratch = command.argv, None
    if command.deferred_link is not None:
        try:
            link = build_command(command.language, command.deferred_link)
        except MnemeError as exc:
            print(f"{tool}: error: {exc}", file=sys.stderr)
            return 1, None
        argv, link_scratch = link.argv, link.scratch
    return children.call(argv), link_scratch


#: The drivers' children; `run` and mneme-nvcc install it first thing.
CHILDREN = _Children()


def execute(command: Command, tool: str) -> None:
    """Runs clang in this process, or, with scratch files or steps, as children."""
    sys.stdout.flush()
    if command.scratch is None:
        if CHILDREN.stopped:
            _finish(-CHILDREN.stopped)
        os.execv(command.argv[0], command.argv)
    code, link_scratch = 1, None
    try:
        code, link_scratch = _run_children(command, tool, CHILDREN)
    finally:
        for directory in (command.scratch, link_scratch):
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)
    _finish(code)


def run(language: str, tool: str) -> None:
    CHILDREN.install()
    try:
        command = build_command(language, sys.argv[1:])
    except MnemeError as exc:
        print(f"{tool}: error: {exc}", file=sys.stderr)
        sys.exit(1)
    execute(command, tool)


def main_cc() -> None:
    """`mneme-cc`: drop-in clang for C and CUDA."""
    run("c", "mneme-cc")


def main_cxx() -> None:
    """`mneme-cxx`: drop-in clang++ for C++ and CUDA."""
    run("c++", "mneme-cxx")
