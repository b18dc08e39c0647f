"""Verification: a replayed buffer against the recorded epilogue.

Bitwise by default (a buffer found nondeterministic gets a policy derived from
its spread, mneme_cc.replay.judging.nondeterminism). A policy for a buffer (from
`ReplayConfig.verify`, which wins over a derived one) is
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
from mneme_cc.replay.judging.compare import abs_difference, diff_buffer, relative, ulp_distance

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
        numbers = (policy.abs, policy.rel, policy.ulp)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0
                   for x in numbers) or not isinstance(policy.norm, str) or \
                (policy.dtype is not None and not isinstance(policy.dtype, str)):
            raise UsageError(f"verification policy for {where}: abs, rel and ulp are numbers "
                             ">= 0, dtype and norm names")
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
    count: int                      # differing elements (bytes without an element type,
    first_indices: list[int]        # or where stats["unit"] says "byte")
    worst_abs: float | None = None
    worst_rel: float | None = None
    norm: float | None = None       # the difference's norm, under a norm policy
    policy: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)  # mneme diff's BufferDiff, as a dict


def compare(name: str, address: int, got: np.ndarray, want: np.ndarray,
            policy: Policy | None = None, element_type: str | None = None) -> Mismatch | None:
    """None when got matches want under policy (bitwise without one). The
    statistics are `mneme diff`'s, with the recording as side A, per element
    of the policy's dtype, else of `element_type` (which changes no verdict)."""
    dtype = policy.dtype if policy is not None else None
    stats = diff_buffer(name, address, want, got, dtype or element_type)
    if stats.same:
        return None
    if dtype is None:
        count = stats.differing if stats.dtype else stats.bytes_differing
        return Mismatch(name, address, count, [f["index"] for f in stats.first],
                        stats=stats.to_dict())
    dt = np.dtype(dtype)
    usable = len(got) // dt.itemsize * dt.itemsize
    w, g = want[:usable].view(dt), got[:usable].view(dt)
    tail_differs = bool((got[usable:] != want[usable:]).any())
    floating = np.issubdtype(dt, np.floating)
    both_nan = np.isnan(w) & np.isnan(g) if floating else np.zeros(len(w), bool)
    nan_ok = (np.isnan(w) == np.isnan(g)) if floating else np.ones(len(w), bool)
    finite = np.isfinite(w) & np.isfinite(g) if floating else np.ones(len(w), bool)
    delta = np.zeros(len(w))
    delta[finite] = abs_difference(w[finite], g[finite])
    delta[~finite & ~both_nan & (w != g)] = np.inf  # an infinity on one side or of another sign
    if policy.norm != "none":
        order = {"l1": 1, "l2": 2, "linf": np.inf}[policy.norm]
        measured = float(np.linalg.norm(delta, order)) if len(delta) else 0.0
        reference = float(np.linalg.norm(np.where(finite, w, 0).astype(np.float64), order)) \
            if len(w) else 0.0
        if measured <= max(policy.abs, policy.rel * reference) and nan_ok.all() \
                and not tail_differs:
            return None
        bad = np.flatnonzero(delta > 0)
        return Mismatch(name, address, int(bad.size), [int(i) for i in bad[:8]],
                        float(delta.max(initial=0)), None, measured, vars(policy),
                        stats.to_dict())
    rel = relative(delta, w)
    ok = (delta <= policy.abs) | (rel <= policy.rel) | both_nan
    if policy.ulp and floating:
        ulps = np.full(len(w), np.inf)
        ulps[finite] = ulp_distance(g[finite], w[finite])
        ok |= ulps <= policy.ulp
    ok &= nan_ok
    bad = np.flatnonzero(~ok)
    if not bad.size and not tail_differs:
        return None
    return Mismatch(name, address, int(bad.size), [int(i) for i in bad[:8]],
                    float(delta[bad].max(initial=0)), float(rel[bad].max(initial=0)), None,
                    vars(policy), stats.to_dict())


def policies_for(spec: dict[str, Any], params: list[dict[str, int]], args: bytes,
                 allocations) -> dict[str, Policy]:
    """Policies keyed by buffer name ("allocation 0x..." or a global's name)."""
    out = {}
    for key, value in spec.items():
        target = key
        if not isinstance(value, dict):
            raise UsageError(f"verification policy '{key}': not an object of fields")
        if key.startswith("arg:"):
            if not key[4:].isdigit():
                raise UsageError(f"verification policy '{key}': arg:N takes a parameter index")
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
            try:
                target = f"allocation {int(key, 16):#x}"
            except ValueError:
                raise UsageError(f"verification policy '{key}': not a hex address") from None
        out[target] = Policy.parse(value, key)
    return out
