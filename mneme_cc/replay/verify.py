"""Verification: a replayed buffer against the recorded epilogue.

Bitwise by default. A policy for a buffer (from `ReplayConfig.verify`) is
addressed by the allocation's address (`"0x200000000000"`), by a kernel
argument that points into it (`"arg:2"`), or by a global's name, and says:

    {"dtype": "float64", "abs": 1e-12, "rel": 1e-9, "ulp": 4, "norm": "linf"}

With `norm` "none" (the default) every element must be within `abs` or
`rel` (or `ulp` units in the last place) of the recorded one; with "l1",
"l2" or "linf" the norm of the difference must be within `abs` (or `rel`
times the recorded norm). NaNs must match NaNs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mneme_cc.errors import UsageError

NORMS = ("none", "l1", "l2", "linf")
POLICY_FIELDS = {"dtype", "abs", "rel", "ulp", "norm"}


@dataclass(frozen=True)
class Policy:
    dtype: str | None = None        # None: compare bytes
    abs: float = 0.0
    rel: float = 0.0
    ulp: int = 0
    norm: str = "none"

    @classmethod
    def parse(cls, spec: dict[str, Any], where: str) -> Policy:
        unknown = set(spec) - POLICY_FIELDS
        if unknown:
            raise UsageError(f"verification policy for {where}: unknown field(s) "
                             f"{', '.join(sorted(unknown))} (known: {', '.join(sorted(POLICY_FIELDS))})")
        policy = cls(**spec)
        if policy.norm not in NORMS:
            raise UsageError(f"verification policy for {where}: norm must be one of "
                             f"{', '.join(NORMS)}")
        if policy.dtype is not None:
            try:
                np.dtype(policy.dtype)
            except TypeError:
                raise UsageError(f"verification policy for {where}: no dtype "
                                 f"{policy.dtype!r}") from None
        elif policy.abs or policy.rel or policy.ulp or policy.norm != "none":
            raise UsageError(f"verification policy for {where}: a tolerance needs a dtype")
        return policy


@dataclass
class Mismatch:
    buffer: str                     # "allocation 0x...", or a global's name
    address: int
    count: int                      # differing elements (bytes without a dtype)
    first_indices: list[int]
    worst_abs: float | None = None
    worst_rel: float | None = None
    norm: float | None = None       # the difference's norm, under a norm policy
    policy: dict[str, Any] = field(default_factory=dict)


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Units in the last place between floats of one type (as float64)."""
    bits = 8 * got.dtype.itemsize
    ints = {16: np.int16, 32: np.int32, 64: np.int64}[bits]
    lowest = -(1 << (bits - 1))

    def line(x: np.ndarray) -> np.ndarray:  # sign-magnitude to a monotonic integer line
        i = x.view(ints).astype(np.int64)
        return np.where(i < 0, lowest - i, i)

    return np.abs(np.subtract(line(got), line(want), dtype=np.float64))


def compare(name: str, address: int, got: np.ndarray, want: np.ndarray,
            policy: Policy | None = None) -> Mismatch | None:
    """None when got matches want under policy (bitwise without one)."""
    if policy is None or policy.dtype is None:
        differ = np.flatnonzero(got != want)
        if not differ.size:
            return None
        return Mismatch(name, address, int(differ.size), [int(i) for i in differ[:8]])
    dtype = np.dtype(policy.dtype)
    usable = len(got) // dtype.itemsize * dtype.itemsize
    g, w = got[:usable].view(dtype), want[:usable].view(dtype)
    tail_differs = bool((got[usable:] != want[usable:]).any())
    if np.issubdtype(dtype, np.floating):
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        nan_ok = np.isnan(g64) == np.isnan(w64)
        diff = np.where(np.isnan(g64) & np.isnan(w64), 0.0, np.abs(g64 - w64))
    else:
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        nan_ok = np.ones(len(g), bool)
        diff = np.abs(g64 - w64)
    scale = np.abs(w64)
    if policy.norm != "none":
        order = {"l1": 1, "l2": 2, "linf": np.inf}[policy.norm]
        measured = float(np.linalg.norm(diff, order)) if len(diff) else 0.0
        reference = float(np.linalg.norm(w64, order)) if len(w64) else 0.0
        if measured <= max(policy.abs, policy.rel * reference) and nan_ok.all() and not tail_differs:
            return None
        bad = np.flatnonzero(diff > 0)
        return Mismatch(name, address, int(bad.size), [int(i) for i in bad[:8]],
                        float(diff.max(initial=0)), None, measured, vars(policy))
    ok = (diff <= policy.abs) | (diff <= policy.rel * scale)
    if policy.ulp and np.issubdtype(dtype, np.floating):
        ok |= ulp_distance(g, w) <= policy.ulp
    ok &= nan_ok
    bad = np.flatnonzero(~ok)
    if not bad.size and not tail_differs:
        return None
    rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1), np.inf)
    return Mismatch(name, address, int(bad.size), [int(i) for i in bad[:8]],
                    float(diff[bad].max(initial=0)), float(rel[bad].max(initial=0)), None,
                    vars(policy))


def policies_for(spec: dict[str, Any], params: list[dict[str, int]], args: bytes,
                 allocations) -> dict[str, Policy]:
    """Policies keyed by buffer name ("allocation 0x..." or a global's name)."""
    out = {}
    for key, value in spec.items():
        target = key
        if key.startswith("arg:"):
            index = int(key[4:])
            if index >= len(params) or params[index]["size"] != 8:
                raise UsageError(f"verification policy '{key}': parameter {index} is not a pointer")
            p = params[index]
            pointer = int.from_bytes(args[p["offset"]:p["offset"] + 8], "little")
            owners = [a for a in allocations if a.address <= pointer < a.address + a.size]
            if not owners:
                raise UsageError(f"verification policy '{key}': it points into no allocation")
            target = f"allocation {owners[0].address:#x}"
        elif key.startswith("0x"):
            target = f"allocation {int(key, 16):#x}"
        out[target] = Policy.parse(value, key)
    return out
