"""Finding clang, the pass plugin and the CUDA toolkit, and checking they fit.

Every setting here has an environment variable (`MNEME_CLANG`,
`MNEME_CUDA_ARCH`, `CUDA_HOME`/`CUDA_PATH`) so that build systems which
only let you name a compiler can still steer it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from mneme_cc.build_info import PACKAGE_DIR, build_info
from mneme_cc.errors import ToolchainError, UsageError

#: The arch chosen when neither the command line nor MNEME_CUDA_ARCH names
#: one: Hopper (H100/H200), the GPUs mneme-cc is developed on.
DEFAULT_CUDA_ARCH = "sm_90"

#: Holds a stand-in for the cuRAND header clang force-includes; added (last
#: in the search order) only when the toolkit lacks the real one.
COMPAT_INCLUDE_DIR = PACKAGE_DIR / "compat" / "include"

_ARCH_PATTERN = re.compile(r"sm_\d+[af]?")


def _is_toolkit(root: Path) -> bool:
    return (root / "include" / "cuda_runtime.h").is_file()


def find_cuda_toolkit() -> Path | None:
    """The toolkit root: CUDA_HOME, CUDA_PATH, /usr/local/cuda, nvcc on PATH.

    Raises:
        ToolchainError: CUDA_HOME or CUDA_PATH is set but is no toolkit (a
            typo there must not silently pick another toolkit).
    """
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(variable)
        if value:
            if not _is_toolkit(Path(value)):
                raise ToolchainError(
                    f"{variable}={value} is not a CUDA toolkit (no include/cuda_runtime.h there)")
            return Path(value)
    candidates = [Path("/usr/local/cuda")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent)
    return next((c for c in candidates if _is_toolkit(c)), None)


def require_cuda_toolkit() -> Path:
    toolkit = find_cuda_toolkit()
    if toolkit is None:
        raise ToolchainError(
            "no CUDA toolkit found (looked at CUDA_HOME, CUDA_PATH, /usr/local/cuda "
            "and nvcc on PATH); set CUDA_HOME to the toolkit's root")
    return toolkit


def cuda_library_dir(toolkit: Path) -> Path:
    """Where libcudart.so lives in this toolkit's layout."""
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
        if (toolkit / sub / "libcudart.so").exists():
            return toolkit / sub
    raise ToolchainError(f"the CUDA toolkit at {toolkit} has no shared runtime (libcudart.so)")


def needs_curand_stand_in(toolkit: Path) -> bool:
    return not (toolkit / "include" / "curand_mtgp32_kernel.h").is_file()


def cuda_compile_flags(toolkit: Path, plugin: Path | None, *, cuda_path: bool = True) -> list[str]:
    """What clang 22 needs to compile CUDA with this toolkit, recordably when
    a plugin is given (the drivers and `mneme config cflags` share these)."""
    flags = ["-Wno-unknown-cuda-version"]  # clang 22 knows CUDA up to 12.9
    if cuda_path:
        flags.append(f"--cuda-path={toolkit}")
    if plugin is not None:
        # cc1 as its own process: the plugin reads clang's resolved floating-
        # point options (the contraction mode is not in the IR) from its
        # command line.
        flags += [f"-fpass-plugin={plugin}", "-fno-integrated-cc1"]
    if needs_curand_stand_in(toolkit):
        flags += ["-idirafter", str(COMPAT_INCLUDE_DIR)]
    return flags


def cuda_release(toolkit: Path) -> tuple[int, int] | None:
    """The toolkit's CUDA release (13, 0), from its cuda.h."""
    try:
        header = (toolkit / "include" / "cuda.h").read_text(errors="replace")
    except OSError:
        return None
    match = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", header)
    return (int(match.group(1)) // 1000, int(match.group(1)) % 1000 // 10) if match else None


# Archs that need a newer PTX ISA than clang 22 writes for the newest CUDA
# it knows (8.8, CUDA 12.9), with the CUDA release whose ptxas reads it.
_PTX_FLOOR = {"110": ("ptx90", (13, 0))}


def ptx_feature_flags(archs: list[str], toolkit: Path) -> list[str]:
    """Raises the PTX version to what the archs need, as nvcc writes it, when
    the toolkit's ptxas reads it (sm_110 needs PTX 9.0, from CUDA 13.0)."""
    release = cuda_release(toolkit)
    needed = {_PTX_FLOOR[m.group(1)] for a in archs
              if (m := re.fullmatch(r"sm_(\d+)[af]?", a)) and m.group(1) in _PTX_FLOOR}
    usable = [feature for feature, since in needed if release and release >= since]
    return [f"--cuda-feature=+{max(usable)}"] if usable else []


def cuda_link_flags(toolkit: Path) -> list[str]:
    """Links the shared CUDA runtime (which the recorder interposes), found at run time."""
    libdir = cuda_library_dir(toolkit)
    return [f"-L{libdir}", f"-Wl,-rpath,{libdir}", "-lcudart"]


def default_cuda_archs() -> list[str]:
    """MNEME_CUDA_ARCH (comma-separated) or the documented default."""
    value = os.environ.get("MNEME_CUDA_ARCH", "").strip()
    if not value:
        return [DEFAULT_CUDA_ARCH]
    archs = [a.strip() for a in value.split(",") if a.strip()]
    if not archs:
        raise UsageError(f"MNEME_CUDA_ARCH='{value}' names no GPU arch (e.g. sm_90 or "
                         "sm_80,sm_90); unset it for the default")
    for arch in archs:
        if not _ARCH_PATTERN.fullmatch(arch):
            raise UsageError(
                f"MNEME_CUDA_ARCH names '{arch}', which is not a CUDA GPU arch "
                f"(expected a value such as sm_80 or sm_90a)")
    return archs


def select_clang() -> str:
    """MNEME_CLANG, else the clang the plugin was built against, else clang-22."""
    chosen = os.environ.get("MNEME_CLANG")
    if chosen:
        found = shutil.which(chosen)
        if not found:
            raise ToolchainError(f"MNEME_CLANG={chosen} is not an executable; point it at clang-22")
        return found
    info = build_info()
    if info.clang and Path(info.clang).exists():
        return info.clang
    for name in (f"clang-{info.llvm_major}", "clang"):
        found = shutil.which(name)
        if found:
            return found
    raise ToolchainError(
        f"no clang found; install clang-{info.llvm_major} or set MNEME_CLANG")


def clang_major(clang: str) -> int:
    try:
        out = subprocess.run([clang, "-dumpversion"], capture_output=True, text=True,
                             check=True).stdout.strip()
        return int(out.split(".")[0])
    except (OSError, subprocess.CalledProcessError, ValueError):
        raise ToolchainError(f"cannot tell the version of {clang} (is it clang?)") from None


def require_plugin(clang: str) -> Path:
    """The pass plugin, after checking that `clang` can load it."""
    info = build_info()
    if info.plugin is None or not info.plugin.is_file():
        raise ToolchainError(
            f"the mneme pass plugin was not built (LLVM {info.llvm_major} was not found "
            f"when mneme-cc was installed); install llvm-{info.llvm_major}-dev and reinstall")
    major = clang_major(clang)
    if major != info.llvm_major:
        raise ToolchainError(
            f"{clang} is clang {major}, but the mneme plugin was built for LLVM "
            f"{info.llvm_major}; set MNEME_CLANG to clang-{info.llvm_major}")
    return info.plugin
