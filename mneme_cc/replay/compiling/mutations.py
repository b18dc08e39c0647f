"""Deliberately wrong transformations, for checking that triage finds a miscompile.

A pass list may name one where a real pass would go
(`sroa,instcombine,mneme-flip-icmp,simplifycfg`); it rewrites the kernel's IR
text in a way that changes what the kernel computes, like a buggy pass would:

    mneme-flip-icmp     the kernel's first integer comparison gets the
                        inverse predicate (`slt` becomes `sge`)
    mneme-drop-store    the kernel's first store is deleted

`mneme bisect` must then name it. Nothing else uses them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mneme_cc.errors import UsageError
from mneme_cc.replay.compiling import irtext

_INVERSE = {"eq": "ne", "ne": "eq", "slt": "sge", "sge": "slt", "sgt": "sle", "sle": "sgt",
            "ult": "uge", "uge": "ult", "ugt": "ule", "ule": "ugt"}


def _kernel_body(text: str, kernel: str) -> tuple[int, int]:
    start, _, end = irtext.kernel_span(text, kernel)
    return start, end


def flip_icmp(text: str, kernel: str) -> str:
    start, end = _kernel_body(text, kernel)
    m = re.compile(r"= icmp (eq|ne|slt|sge|sgt|sle|ult|uge|ugt|ule) ").search(text, start, end)
    if not m:
        raise UsageError(f"mneme-flip-icmp: {kernel} has no integer comparison here")
    return text[:m.start(1)] + _INVERSE[m.group(1)] + text[m.end(1):]


def drop_store(text: str, kernel: str) -> str:
    start, end = _kernel_body(text, kernel)
    m = re.compile(r"^\s*store [^\n]*\n", re.M).search(text, start, end)
    if not m:
        raise UsageError(f"mneme-drop-store: {kernel} has no store here")
    return text[:m.start()] + text[m.end():]


MUTATIONS: dict[str, Callable[[str, str], str]] = {
    "mneme-flip-icmp": flip_icmp,
    "mneme-drop-store": drop_store,
}
