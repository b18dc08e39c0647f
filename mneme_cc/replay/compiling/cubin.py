"""PTX to cubin with ptxas options: through the application's own ptxas when
replay/compiling/assembler.py finds it, else through nvJitLink (cuda-bindings).

ptxas's verbose report is parsed into the binary's resource usage, so every
compiled configuration carries its registers, spills and memory sizes.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mneme_cc.errors import ToolchainError, UsageError
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running.cuda_bindings import cuda_bindings

_PR_SET_PDEATHSIG = 1
_DEVICE_RUNTIME_CALLS = ("__cudaCDP2", "cudaLaunchDevice", "cudaGetParameterBuffer")
# The process's own symbols, libc's prctl among them (no library search at import).
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


@dataclass(frozen=True)
class Resources:
    registers: int
    spill_stores: int          # bytes
    spill_loads: int           # bytes
    local_bytes: int           # stack frame (local memory)
    shared_bytes: int          # static shared memory
    constant_bytes: int        # bank 0 (the kernel's parameters and constants)


@dataclass
class Cubin:
    data: bytes
    resources: Resources
    seconds: float
    log: str


def ptxas_flags(config: ReplayConfig) -> list[str]:
    """The ptxas options a config asks for, as ptxas spells them."""
    # ptxas debugs only what it does not optimise.
    flags = ["-O0", "-lineinfo"] if config.keep_debug_info else [f"-O{config.ptxas_opt_level}"]
    if config.max_registers is not None:
        flags.append(f"-maxrregcount={config.max_registers}")
    return flags


def ptxas_options(config: ReplayConfig, arch: str) -> list[str]:
    """nvJitLink's options: the level goes to ptxas through -Xptxas; -lineinfo
    and -maxrregcount are nvJitLink's own."""
    return [f"-arch={arch}", *(f"-Xptxas={f}" if f.startswith("-O") else f
                               for f in ptxas_flags(config)), "-verbose"]


def parse_resources(log: str, kernel: str) -> Resources:
    """The resource report for kernel (`-verbose`).

    nvJitLink writes ptxas's own lines ("Used 20 registers", "0 bytes stack
    frame, 0 bytes spill stores, ...") and/or its summary ("used 20
    registers, ..., 0 stack, 0 bytes smem, 536 bytes cmem[0], 0 bytes lmem").
    """
    at = log.find(f"'{kernel}'")
    section = log[at:] if at >= 0 else log

    def number(*patterns: str) -> int:
        for pattern in patterns:
            m = re.search(pattern, section, re.IGNORECASE)
            if m:
                return int(m.group(1))
        return 0

    return Resources(
        registers=number(r"used (\d+) registers"),
        spill_stores=number(r"(\d+) bytes spill stores"),
        spill_loads=number(r"(\d+) bytes spill loads"),
        local_bytes=number(r"(\d+) bytes stack frame", r"(\d+) stack\b", r"(\d+) bytes lmem"),
        shared_bytes=number(r"(\d+) bytes smem"),
        constant_bytes=number(r"(\d+) bytes cmem\[0\]"))


def launches_kernels(ptx: str) -> bool:
    """True when the code launches kernels itself (dynamic parallelism): it
    calls into libcudadevrt, which a device link adds, as nvcc's does."""
    return any(call in ptx for call in _DEVICE_RUNTIME_CALLS)


def device_runtime_library(ptxas: Path | None) -> Path:
    """libcudadevrt.a: the toolkit's of the ptxas used, else CUDA_HOME's,
    CUDA_PATH's or /usr/local/cuda's.

    Raises:
        ToolchainError: none is found.
    """
    roots = [ptxas.resolve().parent.parent] if ptxas else []
    roots += [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    roots.append(Path("/usr/local/cuda"))
    for root in roots:
        for sub in ("lib64", "lib", *(str(p.relative_to(root)) for p in root.glob("targets/*/lib"))):
            if (root / sub / "libcudadevrt.a").is_file():
                return root / sub / "libcudadevrt.a"
    raise ToolchainError("the kernel launches kernels (dynamic parallelism) and needs the "
                         "toolkit's libcudadevrt.a, which was not found: set CUDA_HOME")


def compile_cubin(ptx: str, kernel: str, config: ReplayConfig, arch: str,
                  ptxas: Path | None = None) -> Cubin:
    """The cubin of `ptx`, by the ptxas executable `ptxas`, or by nvJitLink;
    linked with libcudadevrt when it launches kernels."""
    runtime = device_runtime_library(ptxas) if launches_kernels(ptx) else None
    if ptxas is not None:
        assembled = _assemble(ptx, kernel, config, arch, ptxas, relocatable=runtime is not None)
        if runtime is None:
            return assembled
        linked = _nvjitlink([f"-arch={arch}"], [("CUBIN", assembled.data)], runtime, kernel)
        return Cubin(linked.data, assembled.resources, assembled.seconds + linked.seconds,
                     assembled.log)
    return _nvjitlink(ptxas_options(config, arch), [("PTX", ptx.encode())], runtime, kernel)


def _nvjitlink(options: list[str], inputs: list[tuple[str, bytes]], library: Path | None,
               kernel: str) -> Cubin:
    """nvJitLink over `inputs` (kind, data), and `library` when given."""
    nvjitlink = cuda_bindings("nvjitlink")
    start = time.perf_counter()
    try:
        handle = nvjitlink.create(len(options), options)
    except Exception as exc:  # the library is missing or refuses the options
        raise ToolchainError(f"nvJitLink: {exc}") from None
    try:
        try:
            for kind, data in inputs:
                nvjitlink.add_data(handle, getattr(nvjitlink.InputType, kind), data, len(data),
                                   f"replay.{kind.lower()}")
            if library is not None:
                nvjitlink.add_file(handle, nvjitlink.InputType.LIBRARY, str(library))
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            nvjitlink.get_error_log(handle, log)
            raise UsageError("ptxas rejected the kernel: "
                             + log.decode(errors="replace").strip().replace("\n", "; ")) from None
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        info = bytearray(nvjitlink.get_info_log_size(handle))
        nvjitlink.get_info_log(handle, info)
    finally:
        nvjitlink.destroy(handle)
    log = info.decode(errors="replace").rstrip("\x00")
    return Cubin(bytes(cubin), parse_resources(log, kernel), time.perf_counter() - start, log)


def _die_with_parent() -> None:
    """In the ptxas child: a compile worker killed at its limit takes ptxas with it."""
    prctl = getattr(_LIBC, "prctl", None)
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _assemble(ptx: str, kernel: str, config: ReplayConfig, arch: str, ptxas: Path,
              relocatable: bool = False) -> Cubin:
    """ptxas itself, with the options nvJitLink would have passed it; through
    pipes, so a killed compile leaves no files behind.  A relocatable cubin
    (`-c`) is for a device link."""
    options = [f"-arch={arch}", "-v", *ptxas_flags(config), *(["-c"] if relocatable else [])]
    start = time.perf_counter()
    try:
        run = subprocess.run([str(ptxas), *options, "/dev/stdin", "-o", "/dev/stdout"],
                             input=ptx.encode(), capture_output=True,
                             preexec_fn=_die_with_parent if _LIBC else None)
    except OSError as exc:
        raise ToolchainError(f"{ptxas}: cannot be run ({exc.strerror})") from None
    log = run.stderr.decode(errors="replace")
    if run.returncode != 0:
        lines = [x for x in log.splitlines() if "error" in x.lower()] or log.splitlines()
        raise UsageError("ptxas rejected the kernel: " + "; ".join(lines[:5]).strip())
    return Cubin(run.stdout, parse_resources(log, kernel), time.perf_counter() - start, log)
