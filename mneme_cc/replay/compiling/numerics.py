"""The numerics rules: what the application's build computed, and which
replay configurations compute the same (docs/numerics.md).

The pass plugin records, per device module, the code-generation options
that change results (`codegen` in the embedded-IR metadata). Most of them
are in the IR already (fast-math flags, denormal modes, the reflect
answers) and need nothing at replay. Three are not, and replay applies
them per compile:

- the -O level: the pipeline (`default<On>` with clang's tuning options for
  that level), the code generator's level and ptxas's level;
- the back end's contraction mode: under clang's `-ffp-contract=fast` the
  code generator may fuse any multiply-add, also in libdevice code whose
  instructions carry no `contract` flag (mneme_cc.replay.compiling.contraction says
  how replay reproduces that);
- ptxas's own contraction of the `mul`/`add` LLVM left unfused, which
  depends on ptxas's level; `pin_contraction` writes those `.rn`, which
  ptxas never fuses, so every ptxas level computes what LLVM decided.

A configuration that changes any of these decisions is numerics-changing:
`numerics_changes()` says how, so a failed verification reads as what it
is rather than as a miscompile.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from mneme_cc.replay.compiling import irtext
from mneme_cc.replay.compiling.llvm import llvm_binding
from mneme_cc.replay.compiling.pipeline import clang_tuning
from mneme_cc.replay.config import ReplayConfig

CONTRACT_MODES = ("fast", "on", "off")
#: Recorded modes as the back end applies them (fast-honor-pragmas leaves
#: contraction to the IR's flags, like on).
_BACKEND_MODE = {"fast": "fast", "fast-honor-pragmas": "on", "on": "on", "off": "off"}
OPT_LEVELS = ("0", "1", "2", "3", "s", "z")


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
        contraction mode from the instructions' flags.

        Raises:
            ValueError: the recorded object has fields of the wrong types.
        """
        meta = meta or {}
        if not isinstance(meta, dict):
            raise ValueError("the metadata is not an object")
        recorded = meta.get("codegen")
        if recorded is None:
            level = "0" if meta.get("o0_attributes_removed") else "3"
            tuning = clang_tuning(int(level))
            return cls(opt_level=level, fp_contract=infer_contract(ir_text or ""),
                       source="inferred", loop_unrolling=tuning["loop_unrolling"],
                       loop_vectorization=tuning["loop_vectorization"],
                       slp_vectorization=tuning["slp_vectorization"])
        if not isinstance(recorded, dict):
            raise ValueError("'codegen' is not an object")
        values = {k: v for k, v in recorded.items() if k in cls.__dataclass_fields__}
        if values.get("opt_level") not in OPT_LEVELS:
            values["opt_level"] = "0" if meta.get("o0_attributes_removed") else "3"
        if values.get("fp_contract") not in _BACKEND_MODE:
            raise ValueError(f"unknown fp_contract {values.get('fp_contract')!r}")
        mllvm, reflect = values.get("mllvm") or [], values.get("reflect") or {}
        if not isinstance(mllvm, list) or not all(isinstance(o, str) for o in mllvm) or \
                not isinstance(reflect, dict) or \
                not all(isinstance(v, int) and not isinstance(v, bool) for v in reflect.values()):
            raise ValueError("'mllvm' or 'reflect' has the wrong type")
        values["mllvm"], values["reflect"] = tuple(mllvm), dict(reflect)
        for name, f in cls.__dataclass_fields__.items():
            kinds = {"bool": (bool,), "str": (str,), "bool | None": (bool, type(None))}
            if name in values and f.type in kinds and not isinstance(values[name],
                                                                     kinds[f.type]):
                raise ValueError(f"'{name}' is not a {f.type}")
        return cls(**values)

    @classmethod
    def from_module(cls, meta: dict[str, Any] | None, bitcode: bytes) -> Codegen:
        """From a record's metadata, reading the bitcode only when an older
        record leaves the options to be inferred from the IR.

        Raises:
            ValueError: the metadata is malformed or LLVM cannot read the bitcode.
        """
        if meta and meta.get("codegen") is not None:
            return cls.from_metadata(meta)
        try:
            text = str(llvm_binding().parse_bitcode(bitcode))
        except RuntimeError as exc:
            raise ValueError(f"LLVM cannot read the module ({exc})") from None
        return cls.from_metadata(meta, text)

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

    def baseline_config(self, **run: Any) -> ReplayConfig:
        """The ReplayConfig that compiles the IR as the application's build did."""
        tuning = {"loop_unrolling": self.loop_unrolling, "loop_interleaving": self.loop_unrolling,
                  "loop_vectorization": self.loop_vectorization,
                  "slp_vectorization": self.slp_vectorization}
        return ReplayConfig(pipeline=f"default<O{self.level}>", tuning=tuning,
                            codegen_opt_level=self.level, ptxas_opt_level=self.ptxas_level, **run)


def codegen_of(kernel) -> Codegen:
    """A recorded kernel's build options (mneme_cc.record.RecordedKernel), read once.

    Raises:
        RecordDBError: the recorded options are malformed.
    """
    cached = getattr(kernel, "_codegen", None)
    if cached is None:
        from mneme_cc.errors import RecordDBError

        try:
            cached = Codegen.from_module(kernel.ir_metadata, kernel.bitcode())
        except ValueError as exc:
            raise RecordDBError(f"{kernel.path}: the build's code-generation options: {exc}") \
                from None
        kernel._codegen = cached
    return cached


def infer_contract(ir_text: str) -> str:
    """The contraction mode the IR shows: `contract` flags outside libdevice
    mean fast, `llvm.fmuladd` on, plain arithmetic off."""
    user = "\n".join(ir_text[start:end] for name, start, end in irtext.functions(ir_text)
                     if not name.startswith("__nv_"))
    if re.search(r"= (?:fadd|fsub|fmul|fdiv|fneg)(?: (?:nnan|ninf|nsz|arcp|afn|reassoc))* "
                 r"(?:contract|fast)\b", user):
        return "fast"
    if "@llvm.fmuladd." in user:
        return "on"
    return "off" if re.search(r"= (?:fadd|fsub|fmul) ", user) else "fast"


# --- classification ----------------------------------------------------------

#: What a numerics change is about: (code, reason) pairs, codes from this list.
CHANGES = ("fp_contract", "fp_reassociate", "pipeline_level", "pass_list", "codegen_level",
           "ptxas")


def contract_mode(config, codegen: Codegen) -> str:
    """The back-end contraction mode a config compiles with."""
    return config.fp_contract or codegen.contract


def changes(config, codegen: Codegen) -> list[tuple[str, str]]:
    """How a config's numerics differ from the application's build, as
    (code, reason) pairs; empty: it makes the same contraction and
    rounding decisions."""
    if config.baseline is not None:
        return []
    out = []
    mode = contract_mode(config, codegen)
    if mode != codegen.contract:
        out.append(("fp_contract", f"fp_contract {mode} instead of the recorded "
                                   f"{codegen.fp_contract}"))
    if config.fp_reassociate:
        out.append(("fp_reassociate", "reassociation (reassoc nsz on every fadd/fsub/fmul)"))
    if mode == "off":  # nothing fuses, whatever the levels: every operation is .rn
        return out
    pipeline = config.pipeline.strip()
    m = re.fullmatch(r"default<O([0-3])>", pipeline)
    level = 0 if pipeline == "none" else int(m.group(1)) if m else None
    if level is not None and (level == 0) != (codegen.level == 0):
        out.append(("pipeline_level", f"the {pipeline} pipeline fuses multiply-adds "
                                      f"differently from the recorded -O{codegen.opt_level}"))
    elif (level is None or config.opt_bisect_limit is not None) and codegen.level > 0:
        what = f"the pass list {pipeline}" if level is None else \
            f"a pipeline cut short by opt_bisect_limit {config.opt_bisect_limit}"
        out.append(("pass_list", f"{what} may fuse multiply-adds differently from the "
                                 f"recorded -O{codegen.opt_level}"))
    if (config.codegen_opt_level == 0) != (codegen.level == 0):
        out.append(("codegen_level", f"code generation at -O{config.codegen_opt_level} fuses "
                                     f"multiply-adds differently from the recorded "
                                     f"-O{codegen.level}"))
    ptxas = 0 if config.keep_debug_info else config.ptxas_opt_level  # cubin.ptxas_flags
    if ptxas != codegen.ptxas_level and not config.pin_contraction:
        out.append(("ptxas", f"ptxas -O{ptxas} instead of the recorded "
                             f"-O{codegen.ptxas_level} may contract differently the mul/add "
                             "LLVM left (pin_contraction fixes them)"))
    return out


def numerics_changes(config, codegen: Codegen) -> list[str]:
    """The reasons of `changes`, in words (what results and reports carry)."""
    return [reason for _, reason in changes(config, codegen)]


def for_bitwise_study(config, codegen: Codegen):
    """(config, None) when a config may run in a study that verifies bit for
    bit, pinned where pinning keeps the build's numerics (ptxas levels);
    (config, why) when it changes them and must be left out. Pass lists run:
    they may well keep the rounding. The config comes back grounded."""
    found = [(code, reason) for code, reason in changes(config, codegen)
             if code not in _MAY_CHANGE]
    if found and {code for code, _ in found} == {"ptxas"}:
        config = dataclasses.replace(config, pin_contraction=True)
        found = [c for c in changes(config, codegen) if c[0] not in _MAY_CHANGE]
    reason = "numerics-changing: " + "; ".join(r for _, r in found) if found else None
    return config.grounded(), reason


#: Changes that may leave the rounding as it was: a study runs them, and a
#: failure says what they changed.
_MAY_CHANGE = {"pass_list"}
