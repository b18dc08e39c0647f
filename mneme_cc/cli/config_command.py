"""`mneme config WHAT`: settings for build systems that are not CMake."""

from __future__ import annotations

import enum
import shlex
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from mneme_cc.cli._errors import reports_errors


class What(str, enum.Enum):
    cc = "cc"
    cxx = "cxx"
    cflags = "cflags"
    ldflags = "ldflags"
    cmakedir = "cmakedir"
    plugin = "plugin"
    version = "version"


def _script(name: str) -> str:
    """The installed console script, next to this interpreter if not on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else (shutil.which(name) or name)


def value_of(what: What) -> str:
    from mneme_cc.build_info import PACKAGE_DIR, build_info
    from mneme_cc.drivers import toolchain

    if what is What.cc:
        return _script("mneme-cc")
    if what is What.cxx:
        return _script("mneme-cxx")
    if what is What.version:
        return build_info().version
    if what is What.cmakedir:
        return str(PACKAGE_DIR / "cmake")
    if what is What.plugin:
        return str(toolchain.require_plugin(toolchain.select_clang()))
    toolkit = toolchain.require_cuda_toolkit()
    if what is What.cflags:
        plugin = toolchain.require_plugin(toolchain.select_clang())
        return shlex.join(toolchain.cuda_compile_flags(toolkit, plugin))
    return shlex.join(toolchain.cuda_link_flags(toolkit))


@reports_errors
def config(what: Annotated[What, typer.Argument(help="The setting to print.")]) -> None:
    """Print a path or flags for using mneme-cc from another build system.

    cc/cxx: the drivers; cflags/ldflags: what to add to a plain clang-22
    build; cmakedir: for find_package(mneme); plugin: the pass plugin;
    version: mneme-cc's version.
    """
    print(value_of(what))
