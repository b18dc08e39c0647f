"""`ReplayConfig`: everything that decides how one replay compiles and runs.

A config is a frozen dataclass that round-trips through JSON. `grounded()`
canonicalises it (fields that cannot matter take fixed values), and `key()`
hashes the grounded form, so equivalent configs share compile-cache entries
and results.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mneme_cc.errors import UsageError
from mneme_cc.replay.compiling.pipeline import Pipeline, clang_tuning

Dim3 = tuple[int, int, int]
#: CUDA's limits on a block's and a grid's sides.
MAX_BLOCK: Dim3 = (1024, 1024, 64)
MAX_GRID: Dim3 = (2**31 - 1, 65535, 65535)
BASELINES = ("original", "ir")
#: LLVM's pipeline tuning options a `default<On>` pipeline takes, with their types.
TUNING_OPTIONS = {"loop_unrolling": bool, "loop_vectorization": bool,
                  "slp_vectorization": bool, "loop_interleaving": bool,
                  "inlining_threshold": int}


#: JSON's scalar types, which a config's plain form and the tuner's memo keep as they are.
PLAIN_SCALARS = (bool, int, float, str)


def _plain(value: Any) -> Any:
    if value is None or type(value) in PLAIN_SCALARS:  # most fields: first, and cheap
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k: _plain(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _dim3(value: Any, name: str) -> Dim3 | None:
    if value is None:
        return None
    if type(value) is int:
        value = (value, 1, 1)
    if not isinstance(value, (list, tuple)):
        raise UsageError(f"{name} must be three positive integers, not {value!r}")
    dims = tuple(value)
    if len(dims) != 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise UsageError(f"{name} must be three positive integers, not {value!r}")
    return dims  # type: ignore[return-value]


#: Each field's JSON type (None allowed where the field's default is None);
#: grid and block are checked as dimensions.
_FIELD_TYPES: dict[str, type] = {
    "shared_mem_bytes": int, "pipeline": str, "tuning": dict, "codegen_opt_level": int,
    "ptxas_opt_level": int, "max_registers": int, "specialize_args": list,
    "specialize_dims": bool, "launch_bounds": bool, "max_threads": int,
    "min_blocks_per_sm": int, "fp_reassociate": bool, "fp_contract": str,
    "pin_contraction": bool, "keep_debug_info": bool, "opt_bisect_limit": int,
    "iterations": int, "warmup": int, "flush_l2": bool, "verify": dict, "baseline": str}
_JSON_NAMES = {int: "an integer", bool: "true or false", str: "a string", dict: "a JSON object"}
_OPTIONAL = {"shared_mem_bytes", "max_registers", "max_threads", "min_blocks_per_sm",
             "fp_contract", "opt_bisect_limit", "baseline"}


def _check_types(config: Any) -> None:
    """A one-line UsageError for a field of the wrong JSON type (a config file
    is the user's; a bad one must not fail deep inside a comparison)."""
    for name, kind in _FIELD_TYPES.items():
        value = getattr(config, name)
        if value is None and name in _OPTIONAL:
            continue
        if kind is list:
            if not isinstance(value, (list, tuple)) or not all(map(_integer, value)):
                raise UsageError(f"{name} must be a list of integers, not {value!r}")
        elif not (_integer(value) if kind is int else type(value) is kind):
            raise UsageError(f"{name} must be {_JSON_NAMES[kind]}, not {value!r}")


def _integer(value: Any) -> bool:
    return type(value) is int  # what JSON writes back (not a bool, not numpy's)


@dataclass(frozen=True)
class ReplayConfig:
    # Launch: None keeps what was recorded.
    grid: Dim3 | None = None
    block: Dim3 | None = None
    shared_mem_bytes: int | None = None
    # Compilation of the recorded IR.
    pipeline: str = "default<O3>"
    tuning: dict[str, Any] = field(default_factory=dict)  # TUNING_OPTIONS; {} clang's for the level
    codegen_opt_level: int = 3
    ptxas_opt_level: int = 3
    max_registers: int | None = None
    specialize_args: tuple[int, ...] = ()   # parameter indices that become constants
    specialize_dims: bool = False           # blockDim/gridDim become constants
    launch_bounds: bool = False
    max_threads: int | None = None          # with launch_bounds; None: the block size
    min_blocks_per_sm: int | None = None    # with launch_bounds
    fp_reassociate: bool = False            # `reassoc nsz` on every fadd/fsub/fmul
    # The back end's multiply-add contraction: "fast", "on" or "off"; None
    # keeps the application's build's (mneme_cc.replay.compiling.numerics).
    fp_contract: str | None = None
    pin_contraction: bool = False           # unfused f32/f64 add/sub/mul as .rn for ptxas
    # Debug information (from -g, -gline-tables-only builds) is stripped: ptxas
    # refuses optimised debugging. Kept, ptxas runs at -O0 with -lineinfo.
    keep_debug_info: bool = False
    opt_bisect_limit: int | None = None     # run only the first N optional passes (triage)
    # Running and checking.
    iterations: int = 20
    warmup: int = 3
    flush_l2: bool = False
    # Per-buffer policies; {}: bitwise, except buffers found nondeterministic.
    verify: dict[str, Any] = field(default_factory=dict)
    # "original": the application's own kernel; "ir": the IR at the recorded
    # settings.  None: compile as this config says.
    baseline: str | None = None

    def __post_init__(self) -> None:
        _check_types(self)
        set_ = object.__setattr__
        set_(self, "grid", _dim3(self.grid, "grid"))
        set_(self, "block", _dim3(self.block, "block"))
        set_(self, "specialize_args", tuple(sorted(set(self.specialize_args))))
        if self.baseline is not None and self.baseline not in BASELINES:
            raise UsageError(f"baseline must be one of {', '.join(BASELINES)}, "
                             f"not {self.baseline!r}")
        for name in ("codegen_opt_level", "ptxas_opt_level"):
            if getattr(self, name) not in (0, 1, 2, 3):
                raise UsageError(f"{name} must be 0..3, not {getattr(self, name)!r}")
        if self.max_registers is not None and not 16 <= self.max_registers <= 255:
            raise UsageError(f"max_registers must be 16..255, not {self.max_registers}")
        if self.iterations < 1 or self.warmup < 0:
            raise UsageError("iterations must be >= 1 and warmup >= 0")
        for name, value in self.tuning.items():
            kind = TUNING_OPTIONS.get(name)
            if kind is None:
                raise UsageError(f"unknown tuning option {name!r} (known: "
                                 f"{', '.join(TUNING_OPTIONS)})")
            if type(value) is not kind:
                raise UsageError(f"tuning option {name} takes a {kind.__name__}, not {value!r}")
        if self.fp_contract is not None and self.fp_contract not in ("fast", "on", "off"):
            raise UsageError(f"fp_contract must be fast, on or off (or null for the "
                             f"application's), not {self.fp_contract!r}")
        Pipeline.parse(self.pipeline)
        if self.opt_bisect_limit is not None and self.opt_bisect_limit < 0:
            raise UsageError("opt_bisect_limit counts passes (>= 0)")
        if any(i < 0 for i in self.specialize_args):
            raise UsageError("specialize_args are parameter indices (>= 0)")

    def to_dict(self) -> dict[str, Any]:
        """JSON's form: keys sorted, tuples as lists (what from_json reads back).
        Field by field: asdict would deep-copy every value first, and the tuner
        asks for the key of every configuration it considers."""
        return {name: _plain(getattr(self, name)) for name in _FIELD_NAMES}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def load(cls, path: Path) -> ReplayConfig:
        """A config from a JSON file (`--config`); one-line errors that name it."""
        from mneme_cc.fileio import read_json_object

        try:
            return cls.from_json(read_json_object(path, "a ReplayConfig"))
        except UsageError as exc:
            message = str(exc)
            raise UsageError(message if message.startswith(str(path)) else
                             f"{path}: {message}") from None

    @classmethod
    def from_json(cls, text: str | dict) -> ReplayConfig:
        data = json.loads(text) if isinstance(text, str) else dict(text)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UsageError(f"unknown ReplayConfig field(s): {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(known))})")
        return cls(**data)

    def grounded(self) -> ReplayConfig:
        """The canonical equivalent: fields with no effect take fixed values."""
        if self.baseline is not None:
            # A baseline compiles nothing of this config's.
            return dataclasses.replace(
                ReplayConfig(), grid=self.grid, block=self.block,
                shared_mem_bytes=self.shared_mem_bytes, iterations=self.iterations,
                warmup=self.warmup, flush_l2=self.flush_l2, verify=self.verify,
                baseline=self.baseline)
        changes: dict[str, Any] = {}
        level = Pipeline.parse(self.pipeline).level
        if level is None:
            changes["tuning"] = {}  # a pass list takes none
        else:  # what the level sets anyway is no setting
            defaults = clang_tuning(level)
            changes["tuning"] = {k: v for k, v in self.tuning.items()
                                 if k not in defaults or defaults[k] != v}
        if not self.launch_bounds:
            changes.update(max_threads=None, min_blocks_per_sm=None)
        if all(getattr(self, name) == value for name, value in changes.items()):
            return self
        return dataclasses.replace(self, **changes)

    #: The fields that change the compiled binary (the rest change how it runs).
    COMPILE_FIELDS = ("pipeline", "tuning", "codegen_opt_level", "ptxas_opt_level", "max_registers",
                      "specialize_args", "specialize_dims", "launch_bounds", "max_threads",
                      "min_blocks_per_sm", "fp_reassociate", "fp_contract", "pin_contraction",
                      "keep_debug_info", "opt_bisect_limit")

    def compile_fields(self) -> dict[str, Any]:
        grounded = self.grounded()
        return {name: getattr(grounded, name) for name in self.COMPILE_FIELDS}

    def key(self) -> str:
        return hashlib.sha256(self.grounded().to_json().encode()).hexdigest()[:16]


_FIELD_NAMES = sorted(f.name for f in dataclasses.fields(ReplayConfig))
