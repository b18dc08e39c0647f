"""`mneme doctor`: what this install has and lacks, with the fix for each part.

Exit status 0 only when record, replay and tune can all run here; 1 when a
part they need is missing (each missing part says how to get it).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Annotated

import typer

from mneme_cc.cli._errors import reports_errors

#: The commands a part serves; record, replay and tune decide the exit status.
BUILD, RECORD, REPLAY, TUNE, CLUSTER = "build", "record", "replay", "tune", "cluster"
#: The oldest driver cuda-bindings 13 runs on (580.65), as cuDriverGetVersion reports CUDA.
MIN_DRIVER_CUDA = 13000


@dataclass
class Part:
    name: str
    found: bool
    what: str               # the version or path found, or what is missing
    fix: str                # how to get it ("" when found)
    needed_by: tuple[str, ...]


def _package(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _first_line(command: list[str]) -> str | None:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0] if out.returncode == 0 and lines else None


def _plugin() -> Part:
    from mneme_cc.build_info import build_info

    info = build_info()
    ok = info.plugin is not None and info.plugin.exists()
    return Part("pass plugin", ok, f"{info.plugin} (LLVM {info.llvm_version})" if ok else
                "not built", "" if ok else "install llvm-22-dev and reinstall mneme-cc "
                "(pip install . builds it)", (BUILD,))


def _clang() -> Part:
    """The clang the drivers run (MNEME_CLANG, the plugin's, clang-22)."""
    from mneme_cc.drivers import toolchain
    from mneme_cc.errors import ToolchainError

    fix = "install clang-22 (Debian/Ubuntu, apt.llvm.org) or set MNEME_CLANG"
    try:
        clang = toolchain.select_clang()
        major = toolchain.clang_major(clang)
    except ToolchainError as exc:
        return Part("clang 22", False, str(exc), fix, (BUILD,))
    ok = major == 22
    return Part("clang 22", ok, f"{clang} (clang {major})", "" if ok else fix, (BUILD,))


def _recorder() -> Part:
    from mneme_cc.build_info import build_info

    lib = build_info().recorder
    ok = lib is not None and lib.exists()
    return Part("recorder", ok, str(lib) if ok else "not built", "" if ok else
                "install the CUDA toolkit and reinstall mneme-cc", (RECORD,))


def _toolkit() -> Part:
    from mneme_cc.drivers import toolchain
    from mneme_cc.errors import ToolchainError

    try:
        root = toolchain.find_cuda_toolkit()
    except ToolchainError as exc:
        return Part("CUDA toolkit", False, str(exc), "fix CUDA_HOME or CUDA_PATH", (BUILD,))
    release = toolchain.cuda_release(root) if root else None
    ok = root is not None
    return Part("CUDA toolkit", ok,
                f"{root} (CUDA {'.'.join(map(str, release))})" if ok and release else
                str(root) if ok else "not found",
                "" if ok else "install the CUDA toolkit or set CUDA_HOME", (BUILD,))


def _driver() -> tuple[Part, Part]:
    """The NVIDIA driver and the GPUs it sees."""
    needs = (RECORD, REPLAY, TUNE)
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return (Part("NVIDIA driver", False, "libcuda.so.1 not found",
                     "install the NVIDIA driver (580.65 or newer)", needs),
                Part("GPU", False, "no driver", "run on a machine with an NVIDIA GPU", needs))
    version = ctypes.c_int(0)
    cuda.cuDriverGetVersion(ctypes.byref(version))
    v = version.value
    ok = v >= MIN_DRIVER_CUDA
    driver = Part("NVIDIA driver", ok, f"CUDA {v // 1000}.{v % 1000 // 10}",
                  "" if ok else "update the NVIDIA driver to 580.65 or newer (CUDA 13)", needs)
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or not count.value:
        return driver, Part("GPU", False, "the driver sees no GPU",
                            "run on a machine with an NVIDIA GPU (check CUDA_VISIBLE_DEVICES)",
                            needs)
    names = []
    for ordinal in range(count.value):
        device, name = ctypes.c_int(0), ctypes.create_string_buffer(256)
        cuda.cuDeviceGet(ctypes.byref(device), ordinal)
        cuda.cuDeviceGetName(name, 256, device)
        names.append(name.value.decode(errors="replace"))
    return driver, Part("GPU", True, ", ".join(names), "", needs)


def _assemblers() -> tuple[Part, Part]:
    from mneme_cc.replay.compiling.assembler import installed_ptxas

    found = [f"{version or '?'} ({path})" for path, version in installed_ptxas()]
    ptxas = Part("ptxas", bool(found), "; ".join(found) or "none found",
                 "" if found else "optional: install the CUDA toolkit of the applications "
                 "(replay then assembles with the application's own ptxas)", ())
    # ptxas serves only applications whose ptxas version is known and
    # installed; everything else (IR kernels among them) goes to nvJitLink.
    version = _package("nvidia-nvjitlink") or _package("nvidia-nvjitlink-cu13")
    nvjitlink = Part("nvJitLink", bool(version), version or "not installed",
                     "" if version else "pip install 'mneme-cc[cuda]'", (REPLAY, TUNE))
    return ptxas, nvjitlink


def _python_package(label: str, name: str, needed_by: tuple[str, ...], fix: str) -> Part:
    version = _package(name)
    return Part(label, version is not None, version or "not installed",
                "" if version else fix, needed_by)


def _llvmlite() -> Part:
    try:
        import llvmlite.binding as llvm
    except ImportError:
        return Part("llvmlite", False, "not installed", "pip install mneme-cc", (REPLAY, TUNE))
    version = ".".join(map(str, llvm.llvm_version_info))
    ok = llvm.llvm_version_info[0] >= 22
    return Part("llvmlite", ok, f"{_package('llvmlite')} (LLVM {version})",
                "" if ok else "pip install 'llvmlite>=0.50' (LLVM 22 or newer reads the IR)",
                (REPLAY, TUNE))


def diagnose() -> list[Part]:
    driver, gpu = _driver()
    ptxas, nvjitlink = _assemblers()
    checks: list[Callable[[], Part]] = [_plugin, _clang, _toolkit, _recorder]
    parts = [check() for check in checks] + [driver, gpu, ptxas, nvjitlink, _llvmlite()]
    parts += [
        _python_package("cuda-bindings", "cuda-bindings", (REPLAY, TUNE),
                        "pip install 'mneme-cc[cuda]'"),
        _python_package("Optuna", "optuna", (TUNE,), "pip install 'mneme-cc[tune]'"),
        _python_package("PostgreSQL driver", "psycopg2-binary", (CLUSTER,),
                        "optional, for one study across hosts: pip install 'mneme-cc[cluster]'"),
    ]
    if not parts[-1].found and _package("psycopg2"):
        parts[-1] = Part("PostgreSQL driver", True, _package("psycopg2"), "", (CLUSTER,))
    return parts


def ready(parts: list[Part]) -> dict[str, bool]:
    """Per command, whether every part it needs is here."""
    return {command: all(p.found for p in parts if command in p.needed_by)
            for command in (BUILD, RECORD, REPLAY, TUNE, CLUSTER)}


@reports_errors
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """What this install has and lacks (plugin, recorder, clang, CUDA toolkit, driver,
    ptxas, nvJitLink, cuda-bindings, Optuna, storage drivers), with the fix for each."""
    parts = diagnose()
    can = ready(parts)
    if as_json:
        print(json.dumps({"python": sys.version.split()[0], "parts": [asdict(p) for p in parts],
                          "ready": can}, indent=2))
    else:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        table = Table("part", "", "found", "fix", box=None, pad_edge=False)
        for p in parts:
            table.add_row(p.name, "ok" if p.found else "[red]missing[/]", escape(p.what),
                          escape(p.fix))
        console = Console() if sys.stdout.isatty() else Console(width=200)
        console.print(table)
        console.print("ready: " + ", ".join(f"{command} {'yes' if ok else 'no'}"
                                            for command, ok in can.items()), highlight=False)
    raise typer.Exit(0 if can[RECORD] and can[REPLAY] and can[TUNE] else 1)
