"""mneme-nvcc's answers where build systems ask nvcc about itself.

CMake tells an nvcc from `--version` ("nvcc: ... Cuda compiler driver"),
reads the toolkit's directories and the host link from the `#$` lines of
`nvcc -v`, and its compiler identification checks `__NVCC__` and
`__CUDACC_VER_*__`.  mneme-nvcc answers as nvcc does, with the toolkit it
compiles against, so CMake applies its nvcc rules: nvcc's flags, its
`-dlink` device-link step, its link through the host compiler, which
mneme-nvcc names as `mneme-cxx` (docs/from-nvcc.md, *CMake*).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from mneme_cc.drivers import toolchain
from mneme_cc.errors import ToolchainError


@functools.cache
def toolkit_version(toolkit: Path) -> tuple[int, int, int] | None:
    """The toolkit's nvcc version (13, 0, 88): version.json, the toolkit's
    own `nvcc --version`, else cuda.h's release with build 0."""
    try:
        data = json.loads((toolkit / "version.json").read_text())
        major, minor, build = (int(p) for p in data["cuda_nvcc"]["version"].split(".")[:3])
        return major, minor, build
    except (OSError, ValueError, KeyError, TypeError):
        pass
    nvcc = toolkit / "bin" / "nvcc"
    if nvcc.is_file():
        try:
            out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True,
                                 timeout=10).stdout
            match = re.search(r"\bV(\d+)\.(\d+)\.(\d+)", out)
            if match:
                return int(match.group(1)), int(match.group(2)), int(match.group(3))
        except (OSError, subprocess.SubprocessError):
            pass
    release = toolchain.cuda_release(toolkit)
    return (*release, 0) if release else None


def predefined_macros(toolkit: Path | None, cuda: bool, rdc: bool) -> list[str]:
    """nvcc's own macros, for every source it compiles (`__CUDACC_RDC__`
    for CUDA sources of relocatable device code)."""
    flags = ["-D__NVCC__"]
    version = toolkit_version(toolkit) if toolkit else None
    if version:
        flags += [f"-D__CUDACC_VER_{part}__={value}"
                  for part, value in zip(("MAJOR", "MINOR", "BUILD"), version, strict=True)]
    if cuda and rdc:
        flags.append("-D__CUDACC_RDC__")
    return flags


def cxx_driver() -> str:
    """mneme-cxx, beside this mneme-nvcc: the host compiler CMake links with."""
    here = Path(sys.argv[0]).parent / "mneme-cxx"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here.absolute())
    return shutil.which("mneme-cxx") or "mneme-cxx"


def library_dirs(toolkit: Path) -> list[str]:
    """nvcc's `LIBRARIES`: the stubs (libcuda.so) and the runtime's directory."""
    dirs = [toolkit / "lib64" / "stubs", toolkit / "lib" / "stubs"]
    found = [str(d) for d in dirs if d.is_dir()][:1]
    try:
        found.append(str(toolchain.cuda_library_dir(toolkit)))
    except ToolchainError:  # no shared runtime: the link says so when it needs one
        pass
    return found


def quoted(args: list[str]) -> str:
    """Arguments as nvcc prints them after `#$`: each in double quotes."""
    return " ".join('"' + a.replace("\\", "\\\\").replace('"', '\\"') + '"' for a in args)


def verbose_preamble(toolkit: Path | None, archs: list[str]) -> list[str]:
    """The `#$ NAME=value` lines nvcc prints first under `-v`."""
    if toolkit is None:
        return []
    includes = [f"-I{toolkit / 'include'}"]
    system = ["-isystem", str(toolkit / "include" / "cccl")] \
        if (toolkit / "include" / "cccl").is_dir() else []
    path = os.pathsep.join([str(Path(cxx_driver()).parent), str(toolkit / "bin"),
                            os.environ.get("PATH", "")])
    lines = [f"TOP={toolkit}",
             f"NVVMIR_LIBRARY_DIR={toolkit / 'nvvm' / 'libdevice'}",
             f"PATH={path}",
             f"INCLUDES={quoted(includes)}",
             f"SYSTEM_INCLUDES={quoted(system)}",
             f"LIBRARIES=  {quoted([f'-L{d}' for d in library_dirs(toolkit)])}"]
    if archs:
        # nvcc's -arch spelling, in which CMake reads the default archs.
        lines.append("GPU_ARCHS=" + " ".join(f"-arch compute_{a.split('_', 1)[1]}"
                                            for a in archs))
    return ["#$ " + line for line in lines]


def version_lines(toolkit: Path | None) -> list[str]:
    """`--version`: nvcc's first line and its release line, for the toolkit used."""
    from mneme_cc import __version__

    lines = [f"nvcc: mneme-nvcc {__version__}, nvcc's command line compiled by clang with "
             f"the mneme plugin, a Cuda compiler driver"]
    version = toolkit_version(toolkit) if toolkit else None
    if version:
        major, minor, build = version
        lines.append(f"Cuda compilation tools, release {major}.{minor}, "
                     f"V{major}.{minor}.{build} (the toolkit at {toolkit})")
    return lines


def all_archs(major_only: bool) -> list[str]:
    """nvcc's `-arch=all` (`all-major`: the sm_X0 archs and the oldest): the real
    archs the toolkit's nvcc lists that clang 22 compiles for; [] when either
    cannot be asked."""
    toolkit = toolchain.find_cuda_toolkit()
    nvcc = toolkit / "bin" / "nvcc" if toolkit else None
    try:
        listed = subprocess.run([str(nvcc), "--list-gpu-code"], capture_output=True, text=True,
                                timeout=30).stdout.split() if nvcc and nvcc.is_file() else []
        known = subprocess.run([toolchain.select_clang(), "--target=nvptx64-nvidia-cuda",
                                "--print-supported-cpus"], capture_output=True, text=True,
                               timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    clang_archs = set(re.findall(r"\bsm_\w+", known.stdout + known.stderr))
    archs = sorted({a for a in listed if re.fullmatch(r"sm_\d+", a) and a in clang_archs},
                   key=lambda a: int(a[3:]))
    if major_only and archs:
        archs = [archs[0], *(a for a in archs[1:] if a.endswith("0"))]
    return archs
