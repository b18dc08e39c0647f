"""Which sides of its block (`blockDim`) a kernel reads, from what it carries.

A kernel that never reads a side of its block cannot index its data by it:
under another block shape covering the same threads it computes other
elements, or faults. Before it searches block shapes, `auto` replays the
kernel once under another shape; a replay that faults costs the study a GPU
worker's restart (about 3 s of a 30 s study), so a shape that changes a side
the kernel never reads is not tried.
"""

from __future__ import annotations

import re

from mneme_cc.errors import MnemeError

_INTRINSIC = re.compile(r"@llvm\.nvvm\.read\.ptx\.sreg\.ntid\.([xyz])\b")
# PTX's register, also in inline assembly within the IR; bare, it is all three.
_REGISTER = re.compile(r"%ntid(?:\.([xyz]))?\b")


def sides_read(kernel) -> frozenset[str] | None:
    """The sides ('x', 'y', 'z') anything in the kernel's module reads, or
    None where that cannot be told (a cubin only, a module that cannot be
    read): then every side may be read."""
    try:
        if kernel.has_ir:
            text = str(kernel.module)
        elif kernel.provenance == "ptx":
            image = kernel.ptx_image()
            if image is None or image.payload is None:
                return None
            text = image.ptx
        else:
            return None
    except (MnemeError, RuntimeError):
        return None
    found = set(_INTRINSIC.findall(text))
    for match in _REGISTER.finditer(text):
        found |= {match.group(1)} if match.group(1) else set("xyz")
    return frozenset(found)
