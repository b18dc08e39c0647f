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

from mneme_cc.build import rdc_compile, rdc_link, toolchain
from mneme_cc.build.rdc_link import OFFLOAD_SECTION
from mneme_cc.errors import MnemeError, UsageError

# Options whose value is the next argument, so that value is not an input.
_TAKES_VALUE = frozenset("""
    -o -x -I -D -U -include -imacros -isystem -idirafter -iquote -iprefix
    -iwithprefix -iwithprefixbefore -isysroot --sysroot -MF -MT -MQ -MJ -Xclang
    -Xlinker -Xassembler -Xpreprocessor -mllvm -L -l -target -arch -T -z -u -e
    -Xcuda-ptxas -Xcuda-fatbinary -Xarch_device -Xarch_host -Xoffload-linker
    -working-directory -ivfsoverlay -include-pch -dependency-file -F -rpath --language
    --param -aux-triple --serialize-diagnostics -Xopenmp-target
""".split())

# Any of these means "do not link".
_NO_LINK = frozenset("-c -S -E -M -MM -fsyntax-only --precompile --cuda-device-only".split())

# These only preprocess, so no IR is made and no plugin is needed.
_PREPROCESS_ONLY = frozenset("-E -M -MM".split())

_CUDA_SUFFIXES = (".cu",)
_OBJECT_SUFFIXES = (".o", ".obj", ".a", ".lo")


@dataclass
class Invocation:
    """What one command line asks clang to do, as far as mneme cares."""

    args: list[str]
    inputs: list[str] = field(default_factory=list)
    cuda_inputs: list[str] = field(default_factory=list)
    links: bool = False
    preprocess_only: bool = False
    names_arch: bool = False
    names_cuda_path: bool = False
    names_plugin: bool = False
    names_cudart: bool = False
    output: str | None = None
    expanded_args: list[str] = field(default_factory=list)  # with response files read


def _expand_response_files(args: list[str], active: frozenset[Path] = frozenset()) -> list[str]:
    """Arguments with `@file` read, nested ones too (for analysis only; clang
    gets the original and reports its own errors, a file that includes
    itself among them)."""
    import shlex

    out: list[str] = []
    for arg in args:
        path = Path(arg[1:]).resolve() if arg.startswith("@") else None
        if path is not None and path.is_file() and path not in active:
            try:
                inner = shlex.split(path.read_text(errors="replace"))
            except ValueError as exc:  # an unbalanced quote
                raise MnemeError(f"response file {arg[1:]}: {exc}") from None
            out.extend(_expand_response_files(inner, active | {path}))
        else:
            out.append(arg)
    return out


def analyse(args: list[str]) -> Invocation:
    inv = Invocation(args=list(args))
    expanded = _expand_response_files(args)
    language = None
    no_link = False
    i = 0
    while i < len(expanded):
        arg = expanded[i]
        value = None
        if arg in _TAKES_VALUE and i + 1 < len(expanded):
            value = expanded[i + 1]
            i += 1
        i += 1
        if arg in ("-x", "--language"):
            language = None if value == "none" else value
        elif arg.startswith("-x") and len(arg) > 2:
            language = None if arg[2:] == "none" else arg[2:]
        elif arg.startswith("--language="):
            language = None if arg[11:] == "none" else arg[11:]
        if arg in ("-lcudart", "-lcudart_static") or arg.endswith("libcudart_static.a") or (
                arg == "-l" and value in ("cudart", "cudart_static")):
            inv.names_cudart = True
        if arg == "-o" and value is not None:
            inv.output = value
        elif arg.startswith("-o") and len(arg) > 2:
            inv.output = arg[2:]
        if value is not None:
            continue
        if arg in _NO_LINK:
            no_link = True
        if arg in _PREPROCESS_ONLY:
            inv.preprocess_only = True
        if arg.startswith(("--cuda-gpu-arch=", "--offload-arch=")) or arg == "--no-offload-arch=all":
            inv.names_arch = True
        elif arg.startswith("--cuda-path="):
            inv.names_cuda_path = True
        elif arg.startswith("-fpass-plugin=") and "MnemePasses" in arg:
            inv.names_plugin = True
        if arg == "-" or not arg.startswith("-"):
            inv.inputs.append(arg)
            if language == "cuda" or (language is None and arg.endswith(_CUDA_SUFFIXES)):
                inv.cuda_inputs.append(arg)
    inv.links = bool(inv.inputs) and not no_link
    inv.expanded_args = expanded
    return inv


def _links_cuda_code(inv: Invocation) -> bool:
    """True if the link pulls in CUDA code, which needs the CUDA runtime."""
    if inv.cuda_inputs or inv.names_cudart:
        return True
    from mneme_cc.build.elf import has_section

    for path in rdc_link.link_inputs(inv.expanded_args, inv.inputs):
        if path.endswith(_OBJECT_SUFFIXES) and Path(path).is_file():
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
    if not inv.names_arch:
        flags += [f"--cuda-gpu-arch={arch}" for arch in toolchain.default_cuda_archs()]
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


def _device_ir_link(inv: Invocation, clang: str) -> tuple[list[str], list[str], Path | None]:
    """What a link of relocatable device code needs: (its arguments, each
    static library named once; clang's device link and, when the objects
    carry IR, the object holding the linked module; a scratch directory)."""
    if {"--emit-static-lib", "-r", "--relocatable"} & set(inv.expanded_args):
        return inv.args, [], None  # an archive or a partial link: the program's link does it
    paths = rdc_link.link_inputs(inv.expanded_args, inv.inputs)
    if not any(_has_offload_code(p) for p in paths):
        return inv.args, [], None
    # With objects alone on the command line clang 22 runs the plain linker
    # even under -fgpu-rdc; only its offload driver runs the linker wrapper
    # (nvlink, fatbinary, the registration code).
    extra = [f for f in ("-fgpu-rdc", "--offload-new-driver") if f not in inv.expanded_args]
    if not inv.names_cuda_path:
        extra.append(f"--cuda-path={toolchain.require_cuda_toolkit()}")
    units = rdc_link.rdc_units(paths)  # each input read once for both uses
    extra += [f"-Wl,--should-extract={arch}" for arch in rdc_link.archived_kernel_archs(units)]
    scratch = Path(tempfile.mkdtemp(prefix="mneme-link-"))
    try:
        obj = rdc_link.linked_ir_object(units, inv.output or "a.out", clang, scratch,
                                        _target_flags(inv.expanded_args))
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return _once_each(inv), extra + ([str(obj)] if obj else []), scratch


def _once_each(inv: Invocation) -> list[str]:
    """The link's arguments with each static library named once, response
    files read only when a library repeats (CMake writes link lines in them)."""
    once = rdc_link.without_repeated_archives(inv.expanded_args)
    return inv.args if once == inv.expanded_args else once


def _target_flags(args: list[str]) -> list[str]:
    """The options of a link that choose the machine its objects are for."""
    flags: list[str] = []
    for arg, value in zip(args, [*args[1:], ""], strict=True):
        if arg in ("-target", "--sysroot", "-isysroot"):
            flags += [arg, value]
        elif arg.startswith(("--target=", "--sysroot=", "-m")) and arg != "-mllvm":
            flags.append(arg)
    return flags


def _has_offload_code(path: str) -> bool:
    from mneme_cc.build.elf import has_section

    try:
        return Path(path).is_file() and has_section(path, OFFLOAD_SECTION)
    except (MnemeError, OSError):
        return False


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
        compiles, link = rdc_compile.split(inv.expanded_args, inv.inputs, _TAKES_VALUE, scratch)
        try:
            steps = [build_command(language, c).argv for c in compiles]
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return Command([], scratch, steps, link, language)
    extra = _cuda_compile_flags(inv, clang) if inv.cuda_inputs else []
    if not (inv.links and _links_cuda_code(inv)):
        return Command([clang, *mode, *extra, *args])
    args, link_extra, scratch = _device_ir_link(inv, clang)
    return Command([clang, *mode, *extra, *_with_shared_cudart(args), *link_extra], scratch)


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
