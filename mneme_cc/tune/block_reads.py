"""On which sides of its launch a kernel reads the block's or the grid's size
(`blockDim`, `gridDim`), from what it carries.

A probe of another block shape covering the same threads changes, on each
side it moves, both the block's size (`blockDim`) and the grid's
(`gridDim`). A kernel that reads neither on a side indexes its data there
by a fixed size: under the probe it fails verification or faults. Before
it searches block shapes, `auto` replays the kernel once under another
shape, and a replay that faults costs the study a GPU worker's restart
(about 1.3 s of a 30 s study), so a shape that moves such a side is not tried.
"""

from __future__ import annotations

import re

from mneme_cc.errors import MnemeError
from mneme_cc.replay.compiling import irtext

# The block's and the grid's sizes, the grid's also counted in clusters.
_SIZES = r"(?:ntid|nctaid|nclusterid|cluster[._]nctaid)"
_INTRINSIC = re.compile(rf"@llvm\.nvvm\.read\.ptx\.sreg\.{_SIZES}\.([xyz])\b")
# PTX's registers, also in inline assembly within the IR; bare, all three sides.
_REGISTER = re.compile(rf"%{_SIZES}(?:\.([xyz]))?\b")
# A call instruction (what follows its keyword), and its target: @name or
# @"quoted name" (direct), %value (through a pointer).
_NAME = r'(?:"[^"\n]*"|[\w.$-]+)'
_CALL = re.compile(rf"^\s*(?:%{_NAME}\s*=\s*)?(?:(?:tail|musttail|notail)\s+)?call\b(.*)$")
_TARGET = re.compile(rf"([@%]{_NAME})\(")
_INLINE_ASM = re.compile(r'^[^"@%]*\basm\b')
# Functions whose code never reads a launch's sizes: LLVM's intrinsics (the
# size reads among them are matched by name), libdevice's math and the
# device runtime's printf and assert.
_KNOWN_PREFIXES = ("llvm.", "__nv_")
_KNOWN = {"vprintf", "__assertfail"}


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
        for line in body.splitlines():
            call = _CALL.match(line)
            if call is None or _INLINE_ASM.match(call.group(1)):
                continue  # not a call, or inline assembly (read with the rest)
            target = _TARGET.search(call.group(1))
            if target is None:
                return None
            callee = target.group(1)
            if callee.startswith("%"):
                return None
            callee = callee[1:]
            if not (callee.startswith(_KNOWN_PREFIXES) or callee in _KNOWN):
                todo.append(callee)
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
