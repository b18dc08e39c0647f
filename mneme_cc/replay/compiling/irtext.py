"""LLVM IR in its text form: finding functions, splitting operand lists,
counting uses, declaring intrinsics.

Replay's transforms (specialisation, the numerics rules, the mutations)
edit the module's text and the LLVM verifier checks the result; this module
is the one place that knows how that text is laid out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

#: The fast-math flags an instruction may carry, as a regex of ` flag` repeats.
FLAGS = r"(?: (?:nnan|ninf|nsz|arcp|contract|afn|reassoc|fast))*"
#: A value name in an operand position: it must not run on into a longer name.
NAME_END = r"(?![\w.$-])"


def function_span(text: str, name: str) -> tuple[int, int, int] | None:
    """(start of the define line, end of it, end of the body) of a defined
    function, or None."""
    m = re.search(rf"^define [^\n]*@{re.escape(name)}\(", text, re.M)
    if not m:
        return None
    line_end = text.index("\n", m.start())
    return m.start(), line_end, text.index("\n}\n", line_end) + 2


def kernel_span(text: str, name: str) -> tuple[int, int, int]:
    """function_span of a kernel the module must define."""
    span = function_span(text, name)
    if span is None:
        from mneme_cc.errors import UsageError

        raise UsageError(f"the recorded IR defines no kernel {name}")
    return span


def function_text(text: str, name: str) -> str | None:
    """One function's definition, from `define` to its closing brace."""
    span = function_span(text, name)
    return text[span[0]:span[2] + 1] if span else None


def functions(text: str) -> Iterator[tuple[str, int, int]]:
    """(name, start of the body, end of the body) of every defined function."""
    for m in re.finditer(r"^define [^\n]*?@(\"[^\"]+\"|[\w.$-]+)\([^\n]*\{$", text, re.M):
        end = text.index("\n}", m.end())
        yield m.group(1).strip('"'), m.end() + 1, end + 1


def map_bodies(text: str, edit: Callable[[str], str]) -> str:
    """The module with every function body passed through edit."""
    out, at = [], 0
    for _, start, end in functions(text):
        out += [text[at:start], edit(text[start:end])]
        at = end
    out.append(text[at:])
    return "".join(out)


def parameters(define_line: str) -> list[str]:
    """The parameters of a `define` line ("ptr noundef %0", ...)."""
    return split_top_level(define_line[define_line.index("(") + 1:], stop=")")


def split_top_level(inner: str, stop: str | None = None) -> list[str]:
    """Comma-separated items at nesting depth 0, stripped; at `stop` at depth 0 the list ends."""
    depth, current, out = 0, "", []
    for ch in inner:
        if ch == stop and depth == 0:
            break
        if ch in "({[<":
            depth += 1
        elif ch in ")}]>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        out.append(current.strip())
    return out


def is_debug_record(line: str) -> bool:
    """`#dbg_value(...)` and friends: they are no uses of a value to LLVM."""
    return line.lstrip().startswith("#dbg_")


def use_counts(body: str) -> dict[str, int]:
    """How often each value is used in a function body (definitions, debug
    records and use-list orders not counted)."""
    counts: dict[str, int] = {}
    for line in body.split("\n"):
        if is_debug_record(line) or line.lstrip().startswith("uselistorder"):
            continue
        for name in re.findall(r"%[\w.$-]+", line.split(" = ", 1)[-1] if " = " in line
                               and line.lstrip().startswith("%") else line):
            counts[name] = counts.get(name, 0) + 1
    return counts


def declare(text: str, name: str, declaration: str) -> str:
    """The module with `declaration` appended when @name is used and not declared."""
    if f"@{name}(" in text and not re.search(rf"^declare [^\n]*@{re.escape(name)}\(", text,
                                               re.M):
        text += f"\n{declaration}\n"
    return text


_USE_LIST_ORDER = re.compile(r"^\s*uselistorder(?:_bb)? [^\n]*\n", re.M)


_ASM_USE_LIST_ORDER = re.compile(r"^\s*uselistorder \S+ asm\b[^\n]*\n", re.M)


def parseable(text: str) -> str:
    """Printed IR as LLVM's parser takes it back: the printer writes the order
    of an inline-asm value's uses, which the parser refuses."""
    return _ASM_USE_LIST_ORDER.sub("", text)


def drop_use_list_orders(text: str) -> str:
    """The module without its `uselistorder` directives: for text whose edits
    added or removed uses, which the directives' counts would no longer fit
    (the order of uses is then LLVM's default, as after any such edit)."""
    return _USE_LIST_ORDER.sub("", text)


def strip_debug_info(text: str) -> str:
    """The module without debug information: debug records, `!dbg`
    attachments and the compile unit go; what they referred to is left
    unreferenced, which LLVM accepts."""
    text = re.sub(r"^\s*#dbg_\w+\(.*\n", "", text, flags=re.M)
    text = re.sub(r", !dbg !\d+", "", text)
    text = re.sub(r" !dbg !\d+(?= \{$)", "", text, flags=re.M)  # a function's subprogram
    text = re.sub(r"^!llvm\.dbg\.cu = .*\n", "", text, flags=re.M)
    # Loop metadata (`!{!5, !6, !7}`) names the loop's locations: they go too.
    locations = set(re.findall(r"^(!\d+) = !DILocation\(", text, re.M))
    if locations:
        def without_locations(m: re.Match) -> str:
            kept = [op for op in split_top_level(m.group(2)) if op not in locations]
            return f"{m.group(1)}{{{', '.join(kept)}}}"

        text = re.sub(r"^(!\d+ = (?:distinct )?!)\{(.*)\}$", without_locations, text,
                      flags=re.M)
    # Declarations of the debug intrinsics' older spelling lose their callers
    # too, and with them the order of those uses.
    text = re.sub(r"^\s*uselistorder ptr @llvm\.dbg\.\w+, .*\n", "", text, flags=re.M)
    return re.sub(r"^\s*(?:tail )?call void @llvm\.dbg\.\w+\(.*\n", "", text, flags=re.M)
