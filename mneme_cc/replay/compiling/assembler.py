"""Which ptxas assembles the replay's PTX: the application's own, when it can be had.

Two ptxas versions make different machine code from the same PTX: on the
floyd_warshall example, ptxas 13.0 gives fw_remaining 32 registers and the
ptxas inside nvJitLink 13.5 gives it 35, and the kernel runs 0.73x as fast.
So the `ir` baseline is the application's binary only when the replay
assembles with the application's ptxas, and a tuned configuration is a gain
of its own only when both sides are assembled alike.

Every cubin ptxas writes names the ptxas that made it in its
`.note.nv.tkinfo` ("ptxas", "Cuda compilation tools, release 13.0,
V13.0.88"). The replay reads that from the recorded image and looks for a
ptxas executable of the same version: $MNEME_PTXAS, $CUDA_HOME, $CUDA_PATH,
/usr/local/cuda*, then PATH. Without one it assembles through nvJitLink and
says which versions differ (`mneme check`, compile results).
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_TKINFO = re.compile(rb"ptxas\x00Cuda compilation tools, release [0-9.]+, V([0-9][0-9.]*)\x00")
_VERSION = re.compile(r"Cuda compilation tools, release [0-9.]+, V([0-9][0-9.]*)")


@dataclass(frozen=True)
class Assembler:
    """What turns PTX into a cubin: a ptxas executable, or nvJitLink (path None)."""

    version: str                # "13.0.88"
    path: Path | None = None
    wanted: str | None = None   # the application's ptxas version, when known

    @property
    def name(self) -> str:
        return f"ptxas {self.version}" if self.path else f"nvJitLink {self.version}"

    @property
    def matches_application(self) -> bool | None:
        """Whether this is the application's ptxas (None: the application's is unknown)."""
        return None if self.wanted is None else bool(self.path) and self.version == self.wanted

    def note(self) -> str | None:
        """One line when the replay cannot assemble as the application did."""
        if self.matches_application is False:
            return (f"the application's kernels were assembled by ptxas {self.wanted}; no ptxas "
                    f"of that version was found (set MNEME_PTXAS or CUDA_HOME), so the replay "
                    f"uses {self.name} and its times may differ from the application's")
        return None


def image_ptxas_version(image: bytes | None) -> str | None:
    """The version of the ptxas that made the application's cubin, from its notes."""
    m = _TKINFO.search(image) if image else None
    return m.group(1).decode() if m else None


def _candidates() -> list[str]:
    found = [os.environ.get("MNEME_PTXAS", "")]
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            found.append(os.path.join(os.environ[variable], "bin", "ptxas"))
    found += ["/usr/local/cuda/bin/ptxas", *sorted(glob.glob("/usr/local/cuda-*/bin/ptxas")),
              shutil.which("ptxas") or ""]
    return [c for c in dict.fromkeys(found) if c and os.access(c, os.X_OK)]


def installed_ptxas() -> list[tuple[str, str | None]]:
    """Every ptxas replay may assemble with (each file once), and its version."""
    files = {os.path.realpath(path): path for path in reversed(_candidates())}
    return [(path, _ptxas_version(path)) for path in reversed(files.values())]


@functools.cache
def _ptxas_version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _VERSION.search(out.stdout)
    return m.group(1) if m else None


@functools.cache
def assembler_for(wanted: str | None, nvjitlink_version: str) -> Assembler:
    """The ptxas of version `wanted` if one is installed, else nvJitLink."""
    if wanted is not None:
        for path in _candidates():
            if _ptxas_version(path) == wanted:
                return Assembler(wanted, Path(path), wanted)
    return Assembler(nvjitlink_version, None, wanted)
