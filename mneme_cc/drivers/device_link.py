"""The device link of relocatable device code, on its own (`nvcc -dlink`) or
inside a program's link, and the mark it leaves.

Objects of relocatable device code register their kernels only through a
device link: clang's linker wrapper runs nvlink and `fatbinary` over the
objects' device code and compiles an object that registers the fatbinary
at start-up.  A program's link through mneme-nvcc/mneme-cxx runs it with
the host link.  `nvcc -dlink` (CMake's device-link step, hand-written
Makefiles) wants that registration object alone, for a host compiler to
link with the objects: the wrapper runs with a stand-in for the host
linker that keeps the object it was handed.

Every device link also defines the hidden symbol each such object's
start-up calls (`DEVICE_LINK_SYMBOL`, added by the pass plugin), so a link
that forgets the device link fails, naming the fix, instead of making a
program that launches nothing.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from mneme_cc.drivers import rdc_link, toolchain
from mneme_cc.drivers.elf import elf_members, section_names_and_data
from mneme_cc.drivers.invocation import Invocation, analyse
from mneme_cc.drivers.rdc_link import OFFLOAD_SECTION
from mneme_cc.errors import BinaryFormatError, MnemeError

#: The section of the device link's mark: an object with it has been
#: through a device link (a final link merges it into `.text`).
MARK_SECTION = ".text.mneme_device_link"

# Device code that launches kernels (dynamic parallelism) calls these,
# which libcudadevrt defines.
_DEVICE_RUNTIME_CALLS = (b"cudaLaunchDevice", b"cudaGetParameterBuffer", b"__cudaCDP2")

_MARK_SOURCE = """\
/* What relocatable device code calls at start-up; only a device link defines it. */
__attribute__((weak, visibility("hidden"), section("{section}"))) void {symbol}(void) {{}}
"""

# Stands in for the host linker under clang's linker wrapper, which passes
# its registration object right after `-o OUTPUT`.
_CAPTURE_SCRIPT = """\
#!/bin/sh
while [ $# -gt 2 ]; do
  if [ "$1" = -o ]; then exec cp -- "$3" {destination}; fi
  shift
done
echo "mneme: clang's linker wrapper handed over no registration object" >&2
exit 1
"""


def _sections(path: str) -> dict[str, list[bytes]]:
    """Section contents by name, over every ELF member of the file."""
    found: dict[str, list[bytes]] = {}
    try:
        for member in elf_members(path):
            for name, data in section_names_and_data(member):
                found.setdefault(name, []).append(bytes(data))
    except (BinaryFormatError, OSError):
        return {}  # not ours to diagnose: the linker will
    return found


def is_device_linked(path: str) -> bool:
    """True for an object (or archive) that holds a device link's output."""
    return Path(path).is_file() and MARK_SECTION in _sections(path)


def uses_device_runtime(paths: list[str]) -> bool:
    """True when device code among these inputs launches kernels itself."""
    for path in paths:
        if not Path(path).is_file():
            continue
        for data in _sections(path).get(OFFLOAD_SECTION, []):
            if any(call in data for call in _DEVICE_RUNTIME_CALLS):
                return True
    return False


def device_runtime_flags() -> list[str]:
    """Hands libcudadevrt to the device link (nvlink), as nvcc does."""
    libdir = toolchain.cuda_library_dir(toolchain.require_cuda_toolkit())
    return ["-Xoffload-linker", "-lcudadevrt", "-Xoffload-linker", f"-L{libdir}"]


def _compile_c(source: str, name: str, clang: str, scratch: Path, target_flags: list[str]) -> Path:
    path = scratch / f"{name}.c"
    path.write_text(source)
    obj = scratch / f"{name}.o"
    command = [clang, *target_flags, "-c", "-x", "c", "-O1", "-fPIC", str(path), "-o", str(obj)]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or ["no output"])[0]
        raise MnemeError(f"cannot compile the device link's {name} ({shlex.join(command)}): "
                         f"{detail}")
    return obj


def mark_object(clang: str, scratch: Path, target_flags: list[str]) -> Path:
    """An object that defines the device link's mark.

    Raises:
        MnemeError: clang cannot compile it.
    """
    from mneme_cc import _native

    source = _MARK_SOURCE.format(section=MARK_SECTION, symbol=_native.DEVICE_LINK_SYMBOL)
    return _compile_c(source, "device_link_mark", clang, scratch, target_flags)


def capture_linker(scratch: Path) -> tuple[Path, Path]:
    """(a stand-in host linker for clang's `--ld-path`, where it leaves the
    registration object)."""
    kept = scratch / "registration.o"
    script = scratch / "keep-registration"
    script.write_text(_CAPTURE_SCRIPT.format(destination=shlex.quote(str(kept))))
    script.chmod(0o700)
    return script, kept


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
    return Path(path).is_file() and OFFLOAD_SECTION in _sections(path)


def _wrapper_flags(inv: Invocation, paths: list[str], units: list[rdc_link.Unit]) -> list[str]:
    """What makes clang run its linker wrapper over these inputs' device code.

    With objects alone on the command line clang 22 runs the plain linker
    even under -fgpu-rdc; only its offload driver runs the linker wrapper
    (nvlink, fatbinary, the registration code).
    """
    flags = [f for f in ("-fgpu-rdc", "--offload-new-driver") if f not in inv.expanded_args]
    if not inv.names_cuda_path:
        flags.append(f"--cuda-path={toolchain.require_cuda_toolkit()}")
    flags += [f"-Wl,--should-extract={arch}" for arch in rdc_link.archived_kernel_archs(units)]
    if uses_device_runtime(paths):
        flags += device_runtime_flags()
    return flags


def _extras(inv: Invocation, units: list[rdc_link.Unit], clang: str, scratch: Path) -> list[str]:
    """The objects every device link adds: the mark and, when the objects
    carry IR, the linked module."""
    target = _target_flags(inv.expanded_args)
    extras = [str(mark_object(clang, scratch, target))]
    linked = rdc_link.linked_ir_object(units, inv.output or "a.out", clang, scratch, target)
    return extras + ([str(linked)] if linked else [])


def in_link(inv: Invocation, clang: str) -> tuple[list[str], list[str], Path | None]:
    """What a program's link of relocatable device code needs: (its
    arguments, each static library named once; clang's device link and the
    objects it adds; a scratch directory to remove afterwards).

    A link that already holds a device link's output (CMake's or a
    Makefile's `-dlink` step) is a host link only, as with nvcc.
    """
    if {"--emit-static-lib", "-r", "--relocatable"} & set(inv.expanded_args):
        return inv.args, [], None  # an archive or a partial link: the program's link does it
    paths = rdc_link.link_inputs(inv.expanded_args, inv.inputs)
    if not any(_has_offload_code(p) for p in paths) or any(is_device_linked(p) for p in paths):
        return inv.args, [], None
    units = rdc_link.rdc_units(paths)  # each input read once for both uses
    scratch = Path(tempfile.mkdtemp(prefix="mneme-link-"))
    try:
        extra = _wrapper_flags(inv, paths, units) + _extras(inv, units, clang, scratch)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return _once_each(inv), extra, scratch


def _once_each(inv: Invocation) -> list[str]:
    """The link's arguments with each static library named once, response
    files read only when a library repeats (CMake writes link lines in them)."""
    once = rdc_link.without_repeated_archives(inv.expanded_args)
    return inv.args if once == inv.expanded_args else once


def standalone(args: list[str], output: str, clang: str) -> tuple[list[list[str]], list[str], Path]:
    """`nvcc -dlink`: (the commands that make the registration object, the
    command that writes `output`, a scratch directory to remove afterwards).

    `args` are the link's inputs and library options (clang spellings);
    `output` gets the registration of their device code, the mark and the
    linked module, for a host compiler to link with the same inputs.

    Raises:
        MnemeError: the toolchain does not allow it, or the linked IR cannot be embedded.
    """
    inv = analyse([*args, "-o", output])
    missing = [p for p in inv.inputs if not Path(p).is_file()]
    if missing:
        raise MnemeError(f"-dlink: {missing[0]} does not exist")
    paths = rdc_link.link_inputs(inv.expanded_args, inv.inputs)
    units = rdc_link.rdc_units(paths)
    scratch = Path(tempfile.mkdtemp(prefix="mneme-dlink-"))
    try:
        extras = _extras(inv, units, clang, scratch)
        steps: list[list[str]] = []
        if any(_has_offload_code(p) for p in paths):
            linker, kept = capture_linker(scratch)
            steps.append([clang, "--driver-mode=g++", *_wrapper_flags(inv, paths, units),
                          f"--ld-path={linker}", *rdc_link.without_repeated_archives(args),
                          "-o", str(scratch / "host-link-not-made")])
            extras.insert(0, str(kept))
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return steps, [clang, "-r", "-nostdlib", *extras, "-o", output], scratch
