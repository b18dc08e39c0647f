"""Multiply-add contraction as the application's build decided it, applied to
IR and PTX text (the rules are in mneme_cc.replay.compiling.numerics).

- `mark_contract`: every floating-point operation may contract, which is
  what clang's `-ffp-contract=fast` tells the code generator (a target
  option llvmlite's target machine cannot take).
- `fold_fma`: NVPTX's IR peephole, run on the flags the build's IR had.
- `fuse_like_backend`: what the back end fuses at code-generation -O0.
- `strip_contract`: no operation may contract (`-ffp-contract=off`).
- `pin_ptx`: unfused PTX arithmetic written `.rn`, which ptxas never fuses.
"""

from __future__ import annotations

import re

from mneme_cc.replay.compiling import irtext
from mneme_cc.replay.compiling.irtext import FLAGS

_FP_OP = re.compile(rf"= (fadd|fsub|fmul|fdiv|frem|fneg)({FLAGS}) ")
_REWRITE_FLAGS = {"reassoc", "arcp", "contract", "afn"}
_VALUE_FLAGS = {"nnan", "ninf", "nsz"}
_SCALAR = r"float|double"
#: `%r = fmul|fadd|fsub <flags> float|double A, B[, !metadata]`
_BINARY = re.compile(rf"^(\s*)(%[\w.$-]+) = (fmul|fadd|fsub)({FLAGS}) ({_SCALAR}) "
                     r"([^,\n]+), ([^,\n]+?)((?:, !.*)?)$")
_NEGATIVE_ZERO = ("-0.000000e+00", "0x8000000000000000")


def _flags(text: str) -> set[str]:
    flags = set(text.split())
    return (flags - {"fast"}) | (_REWRITE_FLAGS | _VALUE_FLAGS if "fast" in flags else set())


def _spelled(flags: set[str]) -> str:
    return "".join(f" {f}" for f in sorted(flags))


def _width(ty: str) -> str:
    return "f32" if ty == "float" else "f64"


def _declare_intrinsics(text: str, intrinsic: str) -> str:
    for ty in ("float", "double"):
        name = f"llvm.{intrinsic}.{_width(ty)}"
        text = irtext.declare(text, name, f"declare {ty} @{name}({ty}, {ty}, {ty})")
    return text


def mark_contract(ir_text: str) -> str:
    """Every floating-point operation gets the `contract` flag."""
    def add(m: re.Match) -> str:
        flags = m.group(2)
        if " contract" in flags or " fast" in flags:
            return m.group(0)
        return f"= {m.group(1)}{flags} contract "

    return _FP_OP.sub(add, ir_text)


def strip_contract(ir_text: str) -> str:
    """No operation may contract: `contract` flags removed (`fast` spelled out
    without it), `llvm.fmuladd` split into a multiply and an add."""
    ops = r"= (?:(?:tail |notail )?call|fadd|fsub|fmul|fdiv|frem|fneg)"
    text = re.sub(rf"({ops}{FLAGS}) fast\b", r"\1 reassoc nnan ninf nsz arcp afn", ir_text)
    text = re.sub(rf"({ops}{FLAGS}) contract\b", r"\1", text)
    return _FMULADD.sub(_split_fmuladd, text)


_FMULADD = re.compile(rf"^(\s*)(%[\w.$-]+) = (?:tail |notail )?call({FLAGS}) ([^@\n]+?) "
                      r"@llvm\.fmuladd\.[\w]+\((.*)\)((?:, !.*)?)$", re.M)


def _split_fmuladd(m: re.Match) -> str:
    indent, result, flags, ty, args, metadata = m.groups()
    values = [arg[len(ty):].strip() for arg in irtext.split_top_level(args)]
    if len(values) != 3 or not all(arg.startswith(ty) for arg in irtext.split_top_level(args)):
        return m.group(0)
    a, b, c = values
    product = f"%mneme.mul.{result[1:]}"
    return (f"{indent}{product} = fmul{flags} {ty} {a}, {b}{metadata}\n"
            f"{indent}{result} = fadd{flags} {ty} {product}, {c}{metadata}")


def fold_fma(ir_text: str) -> str:
    """NVPTX's IR peephole, which runs before instruction selection at -O1
    and above: an fadd/fsub with `contract` whose operand is a single-use
    fmul with `contract` (the first operand first, in any block) becomes
    `llvm.fma` with the flags both share. Replay runs it here, on the flags
    the build's IR had, and turns LLVM's own off (replay.llvm.llvm_binding), so that
    the flags `mark_contract` adds cannot make it fold more than the
    application's compile did."""
    folded = irtext.map_bodies(ir_text, _fold_function)
    if folded != ir_text:  # new calls: the intrinsics' use counts changed
        folded = re.sub(r"^uselistorder ptr @llvm\.fma\.f(?:32|64), .*\n", "", folded, flags=re.M)
    return _declare_intrinsics(folded, "fma")


def _fold_function(body: str) -> str:
    lines: list[str | None] = list(body.split("\n"))
    products: dict[str, tuple[int, set[str], str, str]] = {}  # name -> (line, flags, a, b)
    for i, line in enumerate(lines):
        m = _BINARY.match(line)
        if m and m.group(3) == "fmul":
            products[m.group(2)] = (i, _flags(m.group(4)), m.group(6), m.group(7).strip())
    if not products:
        return body
    uses = irtext.use_counts(body)
    folded: set[str] = set()
    for i, line in enumerate(lines):
        m = _BINARY.match(line or "")
        if not m or m.group(3) == "fmul" or "contract" not in _flags(m.group(4)):
            continue
        indent, result, op, flag_text, ty, x, y, metadata = m.groups()
        flags, y = _flags(flag_text), y.strip()
        chosen = next(((position, name, products[name]) for position, name in enumerate((x, y))
                       if name in products and uses.get(name) == 1
                       and "contract" in products[name][1] and lines[products[name][0]]),
                      None)
        if chosen is None:
            continue
        position, _, (at, product_flags, a, b) = chosen
        other = y if position == 0 else x
        merged = (flags & product_flags & _REWRITE_FLAGS) | ((flags | product_flags) & _VALUE_FLAGS)
        call = f"call{_spelled(merged)} {ty} @llvm.fma.{_width(ty)}"
        negated = f"%mneme.fneg.{result[1:]}"
        if op == "fadd":
            lines[i] = f"{indent}{result} = {call}({ty} {a}, {ty} {b}, {ty} {other}){metadata}"
        elif position == 0:  # fsub(a*b, c) = fma(a, b, -c)
            lines[i] = (f"{indent}{negated} = fneg{_spelled(flags)} {ty} {other}{metadata}\n"
                        f"{indent}{result} = {call}({ty} {a}, {ty} {b}, {ty} {negated}){metadata}")
        else:  # fsub(c, a*b) = fma(-a, b, c)
            lines[i] = (f"{indent}{negated} = fneg{_spelled(product_flags)} {ty} {a}{metadata}\n"
                        f"{indent}{result} = {call}({ty} {negated}, {ty} {b}, {ty} {other})"
                        f"{metadata}")
        lines[at] = None  # the product folded into its one user
        folded.add(chosen[1])
    # The order of a folded product's uses goes with it (every other value
    # keeps as many uses as before), and debug records naming it see poison.
    kept = []
    for line in lines:
        if line is None or (line.lstrip().startswith("uselistorder ")
                            and _directive_value(line) in folded):
            continue
        if folded and irtext.is_debug_record(line):
            line = re.sub(r"(#dbg_\w+\(\s*[^%,]+ )(%[\w.$-]+)",
                          lambda m: m.group(1) + ("poison" if m.group(2) in folded
                                                  else m.group(2)), line)
        kept.append(line)
    return "\n".join(kept)


def _directive_value(line: str) -> str:
    """The value a `uselistorder <type> <value>, {...}` directive orders."""
    head = line.split(", {")[0].split()
    return head[-1] if head else ""


def fuse_like_backend(ir_text: str) -> str:
    """At code-generation -O0 under -ffp-contract=fast the back end fuses a
    multiply into every add or subtract of the same block that uses it (the
    product with fewer uses when both operands are products, the first on a
    tie; `-0 - p` is a negation and `p + p` a doubling to it) and leaves the
    rest `.rn`: those pairs become `llvm.fmuladd`, which it lowers to fma,
    and no flag is added."""
    return _declare_intrinsics(irtext.map_bodies(ir_text, _fuse_function), "fmuladd")


def _fuse_function(body: str) -> str:
    lines = body.split("\n")
    blocks: list[list[int]] = [[]]
    for i, line in enumerate(lines):
        if re.match(r"^[\w.$\"-]+:", line):
            blocks.append([])
        blocks[-1].append(i)
    everywhere = irtext.use_counts(body)
    for block in blocks:
        local = irtext.use_counts("\n".join(lines[i] for i in block))
        products: dict[str, tuple[str, str]] = {}  # result -> (a, b)
        types: dict[str, str] = {}
        for i in block:
            m = _BINARY.match(lines[i])
            if not m:
                continue
            indent, result, op, _flags_text, ty, x, y, _metadata = m.groups()
            y = y.strip()
            if op == "fmul":
                products[result], types[result] = (x, y), ty
                continue
            if x == y or (op == "fsub" and x.strip() in _NEGATIVE_ZERO):
                continue
            # A use in another block is one more use of the product to the DAG.
            candidates = [(local.get(v, 0) + (everywhere.get(v, 0) > local.get(v, 0)), k, v)
                          for k, v in enumerate((x, y)) if types.get(v) == ty]
            if not candidates:
                continue
            _, position, product = min(candidates)
            a, b = products[product]
            other = y if position == 0 else x
            call = f"call {ty} @llvm.fmuladd.{_width(ty)}"
            negated = f"%mneme.neg.{result[1:]}"
            if op == "fadd":
                lines[i] = f"{indent}{result} = {call}({ty} {a}, {ty} {b}, {ty} {other})"
            elif position == 0:  # a*b - c
                lines[i] = (f"{indent}{negated} = fneg {ty} {other}\n"
                            f"{indent}{result} = {call}({ty} {a}, {ty} {b}, {ty} {negated})")
            else:  # c - a*b
                lines[i] = (f"{indent}{negated} = fneg {ty} {a}\n"
                            f"{indent}{result} = {call}({ty} {negated}, {ty} {b}, {ty} {other})")
    return "\n".join(lines)


#: Unfused PTX arithmetic ptxas may contract: f32/f64, half and packed types.
_UNFUSED = re.compile(r"^(\s*(?:@!?%\w+\s+)?)(add|sub|mul)((?:\.ftz|\.sat)*)"
                      r"\.(f32|f64|f16|f16x2|bf16|bf16x2|f32x2)(?![\w.])", re.M)


def pin_ptx(ptx: str) -> str:
    """Unfused `add`/`sub`/`mul` written `.rn`, which ptxas never contracts:
    the result no longer depends on ptxas's level. (Atomics such as
    `red.global.add.f32` are no arithmetic ptxas fuses: left alone.)"""
    return _UNFUSED.sub(lambda m: f"{m.group(1)}{m.group(2)}.rn{m.group(3)}.{m.group(4)}", ptx)


def contractable_in_ptx(ptx: str) -> int:
    """How many unfused `add`/`sub`/`mul` ptxas may still contract."""
    return len(_UNFUSED.findall(ptx))


