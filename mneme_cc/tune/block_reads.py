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
from mneme_cc.replay.compiling import irtext

_INTRINSIC = re.compile(r"@llvm\.nvvm\.read\.ptx\.sreg\.(?:ntid|nctaid)\.([xyz])\b")
# PTX's registers, also in inline assembly within the IR; bare, all three sides.
_REGISTER = re.compile(r"%(?:ntid|nctaid)(?:\.([xyz]))?\b")
# A call's target: @name (direct) or %value (through a pointer).
_CALL = re.compile(r"\bcall\b[^\n]*?([@%][\w.$-]+)\(")
# Functions whose code never reads a launch's sizes: LLVM's intrinsics (the
# size reads among them are matched by name), libdevice's math and the
# device runtime's printf and assert.
_KNOWN = ("llvm.", "__nv_", "vprintf", "__assertfail")


def reachable(text: str, kernel: str) -> str | None:
    """The definitions of the kernel and of every function it calls, directly
    or through others; None where a call's code is not in the module (a call
    through a pointer, a function only declared), so it may read anything."""
    seen, todo, parts = set(), [kernel], []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        body = irtext.function_text(text, name)
        if body is None:
            return None
        parts.append(body)
        for target in _CALL.findall(body):
            if target.startswith("%"):
                return None
            if not target[1:].startswith(_KNOWN):
                todo.append(target[1:])
    return "\n".join(parts)


def sides_read(kernel) -> frozenset[str] | None:
    """The sides ('x', 'y', 'z') whose block or grid size the kernel reads,
    in its IR (its code and what it calls) or else its PTX module, or None
    where that cannot be told (a cubin only, a module that cannot be read,
    a call whose code the module lacks): then every side may be read."""
    try:
        if kernel.has_ir:
            text = reachable(str(kernel.module), kernel.name)
            if text is None:
                return None
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
