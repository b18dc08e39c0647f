"""mneme-nvcc: nvcc's command line, compiled by clang with the mneme plugin.

A build written for nvcc (`make NVCC=mneme-nvcc`, `CMAKE_CUDA_COMPILER=mneme-nvcc`)
keeps its flags: each nvcc option is translated to clang's, and the result
goes through mneme-cxx (`driver.build_command("c++", ...)`), which adds the
toolkit, the pass plugin and the shared CUDA runtime.

nvcc's semantics are kept where clang's defaults differ: `-O` sets the host
level only and device code is optimised (-O3) unless `-G`; `-g` is for host
code, `-lineinfo` and `-G` for device code; the floating-point switches
(`--ftz`, `--prec-div`, `--prec-sqrt`, `--fmad`, `--use_fast_math`) act on
device code, each on its own, with nvcc's defaults (correctly rounded
division and square root, contraction on); `-Xcompiler` options reach only
the host side. Every link gets the CUDA runtime, as with nvcc.

An nvcc option with no clang equivalent, and an option nvcc does not have,
is a one-line error with exit status 2. The clang spellings that a build
configured for a clang CUDA compiler sends pass unchanged.  Build systems
that ask nvcc about itself (CMake) get nvcc's answers (nvcc_identity.py),
and `-dlink` is the device link alone (device_link.py).
docs/from-nvcc.md has the whole table.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mneme_cc.build_info import PACKAGE_DIR
from mneme_cc.drivers import driver, invocation, nvcc_identity, toolchain
from mneme_cc.drivers.nvcc_options import _SOURCE_SUFFIXES, LENIENCY, QUIET, TOOL, NvccError, Translation
from mneme_cc.drivers.nvcc_translate import read_command_line
from mneme_cc.errors import MnemeError

#: What nvcc's headers give CUDA code and clang's lack (host min and max, ...).
COMPAT_HEADER = PACKAGE_DIR / "compat" / "nvcc" / "mneme_nvcc.h"

# ----------------------------------------------------------------------------
# Putting the clang command line together


def translate(argv: list[str]) -> Translation:
    """nvcc's arguments as clang's (`Translation.args`), or a `--help`/`--version`
    action; an NvccError (one line) for an option clang cannot take."""
    tr = read_command_line(argv)
    if tr.action is None and not tr.device_link:
        _finish(tr)
    return tr


def _is_object(path: str) -> bool:
    return path.endswith((".o", ".obj", ".a", ".so", ".lo")) or ".so." in Path(path).name


def _language_of(tr: Translation, path: str) -> str | None:
    """The language clang must be told for an input (None: clang's own choice, or no source)."""
    if _is_object(path):
        return None
    if tr.language:
        return tr.language
    if path.endswith(".c"):
        return "c"  # nvcc compiles .c files as C; clang++ would take them as C++
    return None


def _sources(tr: Translation) -> list[str]:
    return [args[0] for kind, args in tr.tail if kind == "input" and
            (args[0].endswith(_SOURCE_SUFFIXES) or _language_of(tr, args[0]) is not None)]


def _is_cuda(tr: Translation, path: str) -> bool:
    language = _language_of(tr, path)
    return language == "cuda" or (language is None and path.endswith(".cu"))


def _inputs_and_links(tr: Translation) -> tuple[list[str], list[str]]:
    """The inputs, with `-x` wherever nvcc's language is not clang's, and the link items;
    each in the order given (nvcc, too, puts libraries after every input)."""
    inputs: list[str] = []
    current: str | None = None
    for kind, args in tr.tail:
        if kind == "input":
            wanted = _language_of(tr, args[0])
            if wanted != current:
                inputs += ["-x", wanted or "none"]
                current = wanted
            inputs += args
    links = [a for kind, args in tr.tail if kind == "link" for a in args]
    return inputs, links


def _archs(tr: Translation) -> list[str]:
    archs = list(tr.archs)
    names = tr.codes or ([tr.virtual_arch] if tr.virtual_arch else [])
    for name in names:
        archs.append("sm_" + name.split("_", 1)[1])
    return list(dict.fromkeys(archs))


def device_flags(tr: Translation) -> list[str]:
    """Device-side flags for nvcc's semantics (after the user's, so they hold)."""
    dev = "-Xarch_device"
    flags: list[str] = []
    if tr.device_debug and not tr.device_opt:
        flags += [dev, "-O0", dev, "-g", "--cuda-noopt-device-debug"]
    else:
        flags += [dev, "-O3"]  # nvcc's -O is the host's; device code is optimised
        if tr.lineinfo or tr.device_debug:
            flags += [dev, "-gline-tables-only"]
    fast = tr.fast_math
    if tr.fp.get("ftz", fast):
        flags.append("-fgpu-flush-denormals-to-zero")
    if not tr.fp.get("prec-div", not fast):
        # Approximate division and reciprocals (div.approx), as IR flags that replay keeps.
        flags += [dev, "-freciprocal-math", dev, "-fapprox-func"]
    if tr.fp.get("prec-sqrt", not fast):
        flags += [dev, "-mllvm=-nvvm-reflect-add=__CUDA_PREC_SQRT=1"]  # sqrt.rn, nvcc's default
    if not tr.fp.get("fmad", True):
        flags += [dev, "-ffp-contract=off"]
    if fast:
        flags.append("-fgpu-approx-transcendentals")  # sinf as __sinf, ...
    return flags


def _host_flags(tr: Translation, cuda: bool) -> list[str]:
    flags: list[str] = []
    for group in tr.host:
        if cuda and len(group) == 1 and group[0].startswith("-") and \
                group[0] not in invocation.TAKES_VALUE:
            flags += ["-Xarch_host", group[0]]
        else:
            flags += group
    return flags


def _toolkit_includes(cuda: bool) -> list[str]:
    """nvcc's implicit include directories that clang does not add."""
    toolkit = toolchain.find_cuda_toolkit()
    if toolkit is None:
        return []
    flags = [] if cuda else [f"-I{toolkit / 'include'}"]
    if (toolkit / "include" / "cccl").is_dir():  # CUDA 13: Thrust, CUB, libcu++
        flags += ["-isystem", str(toolkit / "include" / "cccl")]
    return flags


def _link_flags(tr: Translation) -> list[str]:
    toolkit = toolchain.find_cuda_toolkit()
    flags: list[str] = []
    if toolkit is not None:
        # nvcc's LIBRARIES: the stubs (libcuda.so for -lcuda) and the runtime's
        # directory, in the order `-v` prints them.
        flags += [f"-L{d}" for d in nvcc_identity.library_dirs(toolkit)]
        if not any(a.startswith("--cuda-path=") for a in tr.front):
            flags.append(f"--cuda-path={toolkit}")  # clang's device link finds nvlink there
    flags += [] if tr.cudart == "none" else ["-lcudart"]
    return flags + ["-lrt", "-lpthread", "-ldl"]  # what nvcc links, so host code may rely on them


def _finish(tr: Translation) -> None:
    sources = _sources(tr)
    cuda = [p for p in sources if _is_cuda(tr, p)]
    if tr.output_kind and tr.output is None and len(sources) == 1:
        tr.front += ["-o", Path(sources[0]).stem + "." + tr.output_kind]
    front: list[str] = list(QUIET)
    if sources:
        toolkit = toolchain.find_cuda_toolkit()
        front += LENIENCY + _toolkit_includes(bool(cuda))
        front += nvcc_identity.predefined_macros(toolkit, bool(cuda), tr.rdc)
    if cuda:
        front += [f"--cuda-gpu-arch={a}" for a in _archs(tr)]
        front += ["-include", str(COMPAT_HEADER)]
        if tr.rdc:
            front.append("-fgpu-rdc")
    inputs, links = _inputs_and_links(tr)
    args = front + tr.front + _host_flags(tr, bool(cuda))
    if not tr.static_lib and "-r" not in tr.front and invocation.analyse(args + inputs).links:
        # nvcc links inputs and libraries as one group: their order does not matter.
        args += ["-Wl,--start-group", *inputs, *links, *_link_flags(tr), "-Wl,--end-group"]
    else:
        args += inputs + links
    if cuda:
        args += device_flags(tr)
    tr.args = args


# ----------------------------------------------------------------------------
# The command


def _print_version() -> list[str]:
    # CMake tells nvcc from "nvcc: ... Cuda compiler driver" and the
    # toolkit's version from "V13.0.88"; clang's own lines follow.
    for line in nvcc_identity.version_lines(toolchain.find_cuda_toolkit()):
        print(line)
    return [toolchain.select_clang(), "--version"]


def _print_help() -> None:
    print(f"usage: {TOOL} [nvcc options] files...\n"
          "Takes nvcc's command line and compiles with clang and the mneme plugin, so the\n"
          "program carries its device IR (mneme inspect) and can be recorded (mneme record).\n"
          "Options, what each becomes and what differs from nvcc: docs/from-nvcc.md.")


def nvcc_command(argv: list[str]) -> driver.Command | None:
    """The clang command for an nvcc command line (None: nothing to run).

    Raises:
        NvccError: the command line cannot be translated.
        MnemeError: the toolchain does not allow the build.
    """
    tr = translate(argv)
    if tr.action == "help":
        _print_help()
        return None
    if tr.action == "version":
        return driver.Command(_print_version())
    for warning in tr.warnings:
        print(f"{TOOL}: warning: {warning}", file=sys.stderr)
    if tr.device_link:
        command = driver.device_link_command(*_device_link_inputs(tr))
        _print_verbose(tr, [*command.steps, command.argv])
        return command
    _print_verbose(tr, [[nvcc_identity.cxx_driver(), *tr.args]])
    return driver.build_command("c++", tr.args)


def _print_verbose(tr: Translation, commands: list[list[str]]) -> None:
    """`-v`: nvcc's `#$` lines: the toolkit's directories, then the commands run
    (a compile or link is mneme-cxx's, which CMake takes for the host linker)."""
    if not tr.verbose:
        return
    toolkit = toolchain.find_cuda_toolkit()
    archs = (_archs(tr) or toolchain.default_cuda_archs()) if _sources(tr) else []
    lines = [f"{TOOL}: nvcc's command line, compiled by clang through mneme-cxx"]
    lines += nvcc_identity.verbose_preamble(toolkit, archs)
    lines += ["#$ " + nvcc_identity.quoted(argv) for argv in commands]
    print("\n".join(lines), file=sys.stderr, flush=True)


def _device_link_inputs(tr: Translation) -> tuple[list[str], str]:
    """(the objects, archives and library options of `-dlink`, its output)."""
    args: list[str] = []
    for flag, value in zip(tr.front, tr.front[1:], strict=False):
        if flag == "-L":
            args += [flag, value]
    for kind, items in tr.tail:
        if kind == "input" and not _is_object(items[0]):
            raise NvccError(f"-dlink links the device code of objects; compile {items[0]} "
                            f"with -dc first")
        args += items
    toolkit = toolchain.find_cuda_toolkit()
    if toolkit is not None:  # nvcc's LIBRARIES, where -lcudadevrt is found
        args += [f"-L{d}" for d in nvcc_identity.library_dirs(toolkit)]
    return args, tr.output or "a_dlink.o"


def main(argv: list[str] | None = None) -> None:
    """`mneme-nvcc`: drop-in nvcc that compiles with clang and the mneme plugin."""
    driver.CHILDREN.install()
    try:
        command = nvcc_command(sys.argv[1:] if argv is None else argv)
    except NvccError as exc:
        print(f"{TOOL}: {exc}", file=sys.stderr)
        sys.exit(2)
    except MnemeError as exc:
        print(f"{TOOL}: error: {exc}", file=sys.stderr)
        sys.exit(1)
    if command is None:
        sys.exit(0)
    driver.execute(command, TOOL)


if __name__ == "__main__":
    main()
