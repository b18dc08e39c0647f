"""The numerics rules: what the application's build computed, and which
replay configurations compute the same.

The pass plugin records, per device module, the code-generation options
that change results (`codegen` in the embedded-IR metadata,
docs/embedded-ir.md). Most of them are in the IR already (fast-math flags,
denormal modes, the reflect module flags) and need nothing at replay. Three
are not, and replay applies them per compile:

- the -O level: the pipeline (`default<On>` with clang's tuning options for
  that level), the code generator's level and ptxas's level;
- the back end's contraction mode: clang's `-ffp-contract=fast` lets the
  code generator fuse any multiply-add, also in libdevice code whose
  instructions carry no `contract` flag. llvmlite's target machine has no
  such option, so after the pipeline every floating-point operation gets
  the flag, which is what the back end then sees. At code-generation -O0
  the back end fuses but keeps its other decisions unfused ones: there the
  multiply-adds it would fuse become `llvm.fmuladd` instead;
- ptxas's own contraction of the `mul`/`add` LLVM left unfused, which
  depends on ptxas's level. `pin_contraction` writes those as `.rn`, which
  ptxas never fuses, so every ptxas level computes what LLVM decided.

A configuration that changes any of these decisions is numerics-changing:
`numerics_changes()` says how, so a failed verification reads as what it
is rather than as a miscompile.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

CONTRACT_MODES = ("fast", "on", "off")
#: Recorded modes as the back end applies them (fast-honor-pragmas leaves
#: contraction to the IR's flags, like on).
_BACKEND_MODE = {"fast": "fast", "fast-honor-pragmas": "on", "on": "on", "off": "off"}
OPT_LEVELS = ("0", "1", "2", "3", "s", "z")


def clang_tuning(level: int) -> dict[str, bool]:
    """clang's pipeline tuning options at -O{level}: unrolling and
    interleaving from -O2 (`-funroll-loops`' default), loop and SLP
    vectorization from -O2 (`-vectorize-loops`, `-vectorize-slp`)."""
    on = level >= 2
    return {"loop_unrolling": on, "loop_interleaving": on, "loop_vectorization": on,
            "slp_vectorization": on}


@dataclass(frozen=True)
class Codegen:
    """The recorded code-generation options of one device module."""

    opt_level: str = "3"
    fp_contract: str = "fast"
    source: str = "cc1"             # "cc1", "module" (cc1 ran in-process), "inferred" (old record)
    denormals_f32: str = "ieee"
    denormals_f64: str = "ieee"
    ftz: bool = False
    prec_div: bool = True
    prec_sqrt: bool = False
    approx_func: bool = False
    approx_transcendentals: bool | None = False
    no_infs: bool = False
    no_nans: bool = False
    no_signed_zeros: bool = False
    reassociate: bool = False
    reciprocal: bool = False
    fast_math: bool = False
    loop_unrolling: bool = True
    loop_vectorization: bool = True
    slp_vectorization: bool = True
    reflect: dict[str, int] = field(default_factory=dict)
    mllvm: tuple[str, ...] = ()

    @classmethod
    def from_metadata(cls, meta: dict[str, Any] | None, ir_text: str | None = None) -> Codegen:
        """From a record's metadata; a record without `codegen` (format 1)
        gets what its IR shows: the level from the -O0 attributes, the
        contraction mode from the instructions' flags."""
        meta = meta or {}
        recorded = meta.get("codegen")
        if isinstance(recorded, dict):
            known = {f for f in cls.__dataclass_fields__}
            values = {k: v for k, v in recorded.items() if k in known}
            if values.get("opt_level") not in OPT_LEVELS:
                values["opt_level"] = "0" if meta.get("o0_attributes_removed") else "3"
            if values.get("fp_contract") not in _BACKEND_MODE:
                values["fp_contract"] = "fast"
            values["mllvm"] = tuple(values.get("mllvm") or ())
            values["reflect"] = dict(values.get("reflect") or {})
            return cls(**values)
        level = "0" if meta.get("o0_attributes_removed") else "3"
        tuning = clang_tuning(int(level))
        return cls(opt_level=level, fp_contract=infer_contract(ir_text or ""), source="inferred",
                   loop_unrolling=tuning["loop_unrolling"],
                   loop_vectorization=tuning["loop_vectorization"],
                   slp_vectorization=tuning["slp_vectorization"])

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "mllvm": list(self.mllvm)}

    @property
    def level(self) -> int:
        """The speed level of the pipeline (-Os and -Oz optimise as -O2)."""
        return int(self.opt_level) if self.opt_level.isdigit() else 2

    @property
    def ptxas_level(self) -> int:
        """What clang's driver passes ptxas for this -O level."""
        return self.level

    @property
    def contract(self) -> str:
        """The back end's contraction mode: fast, on or off."""
        return _BACKEND_MODE[self.fp_contract]

    @property
    def contracts(self) -> bool:
        """Whether the build let anything fuse multiply-adds."""
        return self.contract != "off"

    def baseline_config(self, **run: Any):
        """The ReplayConfig that compiles the IR as the application's build did."""
        from mneme_cc.replay.config import ReplayConfig

        tuning = {"loop_unrolling": self.loop_unrolling, "loop_interleaving": self.loop_unrolling,
                  "loop_vectorization": self.loop_vectorization,
                  "slp_vectorization": self.slp_vectorization}
        return ReplayConfig(pipeline=f"default<O{self.level}>", tuning=tuning,
                            codegen_opt_level=self.level, ptxas_opt_level=self.ptxas_level, **run)


def codegen_of(kernel) -> Codegen:
    """A recorded kernel's build options (mneme_cc.recorddb.Kernel), read once."""
    cached = getattr(kernel, "_codegen", None)
    if cached is None:
        meta = kernel.ir_metadata
        if meta is not None and not isinstance(meta.get("codegen"), dict):
            cached = Codegen.from_metadata(meta, str(kernel.module))  # an older record: infer
        else:
            cached = Codegen.from_metadata(meta)
        kernel._codegen = cached
    return cached


def infer_contract(ir_text: str) -> str:
    """The contraction mode the IR shows: `contract` flags outside libdevice
    mean fast, `llvm.fmuladd` on, plain arithmetic off."""
    user = "\n".join(body for name, body in _functions(ir_text) if not name.startswith("__nv_"))
    if re.search(r"= (?:fadd|fsub|fmul|fdiv|fneg)\b[^\n=]*\bcontract\b", user) or \
            re.search(r"= (?:fadd|fsub|fmul|fdiv|fneg) (?:[a-z]+ )*fast\b", user):
        return "fast"
    if "@llvm.fmuladd." in user:
        return "on"
    return "off" if re.search(r"= (?:fadd|fsub|fmul) ", user) else "fast"


def _functions(ir_text: str):
    for m in re.finditer(r"^define [^\n]*@([\w.$\"]+)\(.*?^\}$", ir_text, re.M | re.S):
        yield m.group(1).strip('"'), m.group(0)


# --- transforms --------------------------------------------------------------

_FLAGS = r"(?: (?:nnan|ninf|nsz|arcp|contract|afn|reassoc|fast))*"
_FP_OP = re.compile(rf"= (fadd|fsub|fmul|fdiv|frem|fneg)({_FLAGS}) ")


def mark_contract(ir_text: str) -> str:
    """Every floating-point operation may contract (what -ffp-contract=fast
    tells the code generator about all of them)."""
    def add(m: re.Match) -> str:
        flags = m.group(2)
        if " contract" in flags or " fast" in flags:
            return m.group(0)
        return f"= {m.group(1)}{flags} contract "

    return _FP_OP.sub(add, ir_text)


def strip_contract(ir_text: str) -> str:
    """No operation may contract: `contract` flags removed (`fast` spelled
    out without it), `llvm.fmuladd` split into a multiply and an add."""
    ops = r"= (?:(?:tail |notail )?call|fadd|fsub|fmul|fdiv|frem|fneg)"
    text = re.sub(rf"({ops}{_FLAGS}) fast\b", r"\1 reassoc nnan ninf nsz arcp afn", ir_text)
    text = re.sub(rf"({ops}{_FLAGS}) contract\b", r"\1", text)
    return _FMULADD.sub(_split_fmuladd, text)


_FMULADD = re.compile(
    r"^(\s*)(%[\w.]+) = (?:tail |notail )?call (?:[a-z]+ )*(float|double|half) "
    r"@llvm\.fmuladd\.f(?:16|32|64)\((?:float|double|half) ([^,]+), (?:float|double|half) "
    r"([^,]+), (?:float|double|half) ([^,)]+)\)(.*)$", re.M)


def _split_fmuladd(m: re.Match) -> str:
    indent, result, ty, a, b, c, rest = m.groups()
    return (f"{indent}{result}.mul = fmul {ty} {a}, {b}\n"
            f"{indent}{result} = fadd {ty} {result}.mul, {c}")


_REWRITE_FLAGS = {"reassoc", "arcp", "contract", "afn"}
_VALUE_FLAGS = {"nnan", "ninf", "nsz"}
_BINARY = re.compile(rf"^(\s*)(%[\w.]+) = (fmul|fadd|fsub)({_FLAGS}) (float|double) "
                     r"([^,\n]+), ([^,\n]+?)$")


def _flags(text: str) -> set[str]:
    flags = set(text.split())
    return (flags - {"fast"}) | (_REWRITE_FLAGS | _VALUE_FLAGS if "fast" in flags else set())


def fold_fma(ir_text: str) -> str:
    """NVPTX's IR peephole, which runs before instruction selection at -O1
    and above: an fadd/fsub with `contract` whose operand is a single-use
    fmul with `contract` (the first operand first, in any block) becomes
    `llvm.fma`. Replay runs it here, on the flags the build's IR had, and
    turns LLVM's own off, so that the flags added for -ffp-contract=fast
    (which the back end's option does not put on instructions) cannot make
    it fold more than the application's compile did."""
    pieces = re.split(r"(^define [^\n]*\{$)", ir_text, flags=re.M)
    for i in range(1, len(pieces)):
        if pieces[i - 1].startswith("define"):
            end = pieces[i].find("\n}\n")
            end = len(pieces[i]) if end < 0 else end
            pieces[i] = _fold_function(pieces[i][:end]) + pieces[i][end:]
    text = "".join(pieces)
    for ty, width in (("float", "f32"), ("double", "f64")):
        if f"@llvm.fma.{width}(" in text and not re.search(
                rf"^declare [^\n]*@llvm\.fma\.{width}\(", text, re.M):
            text += f"\ndeclare {ty} @llvm.fma.{width}({ty}, {ty}, {ty})\n"
    return text


def _fold_function(body: str) -> str:
    lines = body.split("\n")
    products: dict[str, tuple[int, set[str], str, str]] = {}  # name -> (line, flags, a, b)
    for i, line in enumerate(lines):
        m = _BINARY.match(line)
        if m and m.group(3) == "fmul":
            products[m.group(2)] = (i, _flags(m.group(4)), m.group(6), m.group(7).strip())
    if not products:
        return body
    uses: dict[str, int] = {}
    for name in re.findall(r"%[\w.]+", body):
        uses[name] = uses.get(name, 0) + 1  # the definition counts once too
    for i, line in enumerate(lines):
        m = _BINARY.match(line)
        if not m or m.group(3) == "fmul":
            continue
        indent, result, op, flag_text, ty, x, y = m.groups()
        flags = _flags(flag_text)
        if "contract" not in flags:
            continue
        y = y.strip()
        chosen = None
        for position, operand in enumerate((x, y)):
            product = products.get(operand)
            if product and uses.get(operand) == 2 and "contract" in product[1] and \
                    lines[product[0]] is not None:
                chosen = position, operand, product
                break
        if chosen is None:
            continue
        position, name, (at, product_flags, a, b) = chosen
        other = y if position == 0 else x
        merged = (flags & product_flags & _REWRITE_FLAGS) | ((flags | product_flags) & _VALUE_FLAGS)
        fma_flags = "".join(f" {f}" for f in sorted(merged))
        width = "f32" if ty == "float" else "f64"
        call = f"call{fma_flags} {ty} @llvm.fma.{width}"
        negated = f"%mneme.fneg.{result[1:]}"
        if op == "fadd":
            lines[i] = f"{indent}{result} = {call}({ty} {a}, {ty} {b}, {ty} {other})"
        elif position == 0:  # fsub(a*b, c) = fma(a, b, -c)
            neg_flags = "".join(f" {f}" for f in sorted(flags))
            lines[i] = (f"{indent}{negated} = fneg{neg_flags} {ty} {other}\n"
                        f"{indent}{result} = {call}({ty} {a}, {ty} {b}, {ty} {negated})")
        else:  # fsub(c, a*b) = fma(-a, b, c)
            neg_flags = "".join(f" {f}" for f in sorted(product_flags))
            lines[i] = (f"{indent}{negated} = fneg{neg_flags} {ty} {a}\n"
                        f"{indent}{result} = {call}({ty} {negated}, {ty} {b}, {ty} {other})")
        lines[at] = None  # type: ignore[call-overload]
    return "\n".join(line for line in lines if line is not None)


def fuse_like_backend(ir_text: str) -> str:
    """At code-generation -O0 under -ffp-contract=fast the back end fuses a
    multiply into every add or subtract of the same block that uses it (and
    leaves the rest `.rn`): those pairs become `llvm.fmuladd`, which it
    lowers to fma, and no flag is added."""
    pieces = re.split(r"(^define [^\n]*\{$|^\}$)", ir_text, flags=re.M)
    for i in range(1, len(pieces)):  # a function's body follows its define line
        if pieces[i - 1].startswith("define"):
            pieces[i] = _fuse_function(pieces[i])
    text = "".join(pieces)
    for ty, width in (("float", "f32"), ("double", "f64")):
        if f"@llvm.fmuladd.{width}(" in text and not re.search(
                rf"^declare [^\n]*@llvm\.fmuladd\.{width}\(", text, re.M):
            text += f"\ndeclare {ty} @llvm.fmuladd.{width}({ty}, {ty}, {ty})\n"
    return text


_DEF = re.compile(rf"^\s*(%[\w.]+) = (fmul|fadd|fsub)({_FLAGS}) (float|double) "
                  r"([^,\n]+), ([^,\n]+?)(, !.*)?$")
_NEGATIVE_ZERO = ("-0.000000e+00", "0x8000000000000000")
_LABEL = re.compile(r"^[\w.$\"-]+:")


def _fuse_function(body: str) -> str:
    lines = body.split("\n")
    blocks: list[list[int]] = [[]]
    for i, line in enumerate(lines):
        if _LABEL.match(line):
            blocks.append([])
        blocks[-1].append(i)
    for block in blocks:
        inside = [lines[i] for i in block]
        local: dict[str, int] = {}
        for line in inside:
            for name in re.findall(r"%[\w.]+", line.split("=", 1)[-1]):
                local[name] = local.get(name, 0) + 1
        products: dict[str, tuple[str, str, str]] = {}  # result -> (type, a, b)
        for i in block:
            m = _DEF.match(lines[i])
            if not m:
                continue
            result, op, _flags, ty, x, y, _md = m.groups()
            if op == "fmul":
                products[result] = (ty, x, y)
                continue
            # `-0.0 - p` is a negation and `p + p` a doubling to the back end.
            if x == y or (op == "fsub" and x.strip() in _NEGATIVE_ZERO):
                continue
            # The back end prefers the product with fewer uses (a use in
            # another block counts once), the first operand on a tie.
            candidates = [(_uses(v, local, body), k, v) for k, v in enumerate((x, y))
                          if v in products and products[v][0] == ty]
            if not candidates:
                continue
            _, position, product = min(candidates)
            lines[i] = _fused(lines[i], result, op, ty, products[product][1:],
                              y if position == 0 else x, position)
    return "\n".join(lines)


def _uses(name: str, local: dict[str, int], body: str) -> int:
    total = len(re.findall(rf"{re.escape(name)}(?![\w.])", body)) - 1  # less its definition
    here = local.get(name, 0)
    return here + (1 if total > here else 0)


def _fused(line: str, result: str, op: str, ty: str, product: tuple[str, str], other: str,
           position: int) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    width = "f32" if ty == "float" else "f64"
    a, b = product
    call = f"call {ty} @llvm.fmuladd.{width}"
    if op == "fadd":
        return f"{indent}{result} = {call}({ty} {a}, {ty} {b}, {ty} {other})"
    negated = f"%mneme.neg.{result[1:]}"  # named: it takes no number from the function
    if position == 0:  # a*b - c
        return (f"{indent}{negated} = fneg {ty} {other}\n"
                f"{indent}{result} = {call}({ty} {a}, {ty} {b}, {ty} {negated})")
    return (f"{indent}{negated} = fneg {ty} {a}\n"  # c - a*b
            f"{indent}{result} = {call}({ty} {negated}, {ty} {b}, {ty} {other})")


_UNFUSED = re.compile(r"^(\s*(?:@!?%\w+\s+)?)(add|sub|mul)((?:\.ftz|\.sat)*)\.(f32|f64)\b",
                      re.M)


def pin_ptx(ptx: str) -> str:
    """Unfused `add`/`sub`/`mul` of f32/f64 written `.rn`, which ptxas never
    contracts: the result no longer depends on ptxas's level. (Atomics such
    as `red.global.add.f32` are not arithmetic ptxas fuses: left alone.)"""
    return _UNFUSED.sub(lambda m: f"{m.group(1)}{m.group(2)}.rn{m.group(3)}.{m.group(4)}", ptx)


def contractable_in_ptx(ptx: str) -> int:
    """How many `add`/`sub`/`mul` of f32/f64 ptxas may still contract."""
    return len(_UNFUSED.findall(ptx))


# --- classification ----------------------------------------------------------

def contract_mode(config, codegen: Codegen) -> str:
    """The back-end contraction mode a config compiles with."""
    return config.fp_contract or codegen.contract


def numerics_changes(config, codegen: Codegen) -> list[str]:
    """How a config's numerics differ from the application's build (empty:
    it makes the same contraction and rounding decisions)."""
    if config.baseline is not None:
        return []
    out = []
    mode = contract_mode(config, codegen)
    if mode != codegen.contract:
        out.append(f"fp_contract {mode} instead of the recorded {codegen.fp_contract}")
    if config.fp_reassociate:
        out.append("reassociation (reassoc nsz on every fadd/fsub/fmul)")
    if not codegen.contracts and mode == "off":
        return out
    m = re.fullmatch(r"default<O([0-3])>", config.pipeline.strip())
    level = int(m.group(1)) if m else None
    if config.pipeline.strip() == "none" or (level == 0) != (codegen.level == 0):
        out.append(f"the {config.pipeline} pipeline fuses multiply-adds differently from the "
                   f"recorded -O{codegen.opt_level}")
    if (config.codegen_opt_level == 0) != (codegen.level == 0):
        out.append(f"code generation at -O{config.codegen_opt_level} fuses multiply-adds "
                   f"differently from the recorded -O{codegen.level}")
    if config.ptxas_opt_level != codegen.ptxas_level and not config.pin_contraction:
        out.append(f"ptxas -O{config.ptxas_opt_level} instead of the recorded "
                   f"-O{codegen.ptxas_level} may contract differently the mul/add LLVM left "
                   "(pin_contraction fixes them)")
    return out


def for_bitwise_study(config, codegen: Codegen):
    """(config, None) when a config may run in a study that verifies bit for
    bit, pinned where pinning keeps the build's numerics (ptxas levels);
    (config, why) when it changes them and must be left out."""
    changes = numerics_changes(config, codegen)
    if changes and not config.pin_contraction and all(c.startswith("ptxas") for c in changes):
        import dataclasses

        config = dataclasses.replace(config, pin_contraction=True).grounded()
        changes = numerics_changes(config, codegen)
    return config, ("numerics-changing: " + "; ".join(changes)) if changes else None
