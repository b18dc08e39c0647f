"""An LLVM optimisation pipeline as replay names it, and clang's tuning of
the `default<On>` pipelines per level."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mneme_cc.errors import UsageError


def clang_tuning(level: int) -> dict[str, bool]:
    """clang's pipeline tuning options at -O{level}: unrolling and
    interleaving from -O2 (`-funroll-loops`' default), loop and SLP
    vectorization from -O2 (`-vectorize-loops`, `-vectorize-slp`)."""
    on = level >= 2
    return {"loop_unrolling": on, "loop_interleaving": on, "loop_vectorization": on,
            "slp_vectorization": on}


@dataclass(frozen=True)
class Pipeline:
    """A pipeline string: `default<O0..O3>`, `none` (no pass: bisection's start), or
    a comma list of pass names (checked against LLVM by replay.llvm.pipeline_of)."""

    level: int | None          # default<O{level}>, or None for a pass list
    passes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Pipeline:
        if not isinstance(text, str):
            raise UsageError(f"pipeline must be a string such as default<O3>, not {text!r}")
        text = text.strip()
        m = re.fullmatch(r"default<O([0-3])>", text)
        if m:
            return cls(int(m.group(1)))
        if text == "none":
            return cls(None, ())
        passes = tuple(p.strip() for p in text.split(",") if p.strip())
        if not passes:
            raise UsageError(f"pipeline '{text}' names no pass; use default<O0>..default<O3>, "
                             "none, or a comma list of pass names")
        return cls(None, passes)

    def __str__(self) -> str:
        if self.level is not None:
            return f"default<O{self.level}>"
        return ",".join(self.passes) or "none"
