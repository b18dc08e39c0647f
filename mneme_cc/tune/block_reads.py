"""On which sides of its launch a kernel reads the block's or the grid's size
(`blockDim`, `gridDim`), from what it carries.

A probe of another block shape covering the same threads changes, on each
side it moves, both the block's size (`blockDim`) and the grid's
(`gridDim`). A kernel that reads neither on a side indexes its data there
by a fixed size: under the probe it fails verification or faults. Before
it searches block shapes, `auto` replays the kernel once under another
shape, and a replay that faults costs the study a GPU worker's restart
(about 3 s of a 30 s study), so a shape that moves such a side is not tried.
"""

from __future__ import annotations

import re

from mneme_cc.errors import MnemeError

_INTRINSIC = re.compile(r"@llvm\.nvvm\.read\.ptx\.sreg\.(?:ntid|nctaid)\.([xyz])\b")
# PTX's registers, also in inline assembly within the IR; bare, all three sides.
_REGISTER = re.compile(r"%(?:ntid|nctaid)(?:\.([xyz]))?\b")


def sides_read(kernel) -> frozenset[str] | None:
    """The sides ('x', 'y', 'z') whose block or grid size anything in the
    kernel's module reads, or None where that cannot be told (a cubin only,
    a module that cannot be read): then every side may be read."""
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
