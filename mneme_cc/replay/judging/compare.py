"""How two versions of one buffer differ, byte by byte and element by element:
the one comparer behind verification (mneme_cc.replay.judging.verify) and `mneme diff`.

Side A is the reference (the recorded epilogue, when verifying): relative
errors are relative to A's values, and float64 differences are taken in
extended precision, so they cannot overflow. For
floating-point types an element differs when its bits differ, so +0 against
-0 and NaNs with different payloads count, and are reported apart:

    nan_mismatches      NaN on one side only
    inf_mismatches      an infinity on one side, or infinities of opposite sign
    signed_zeros        +0 against -0
    max_abs, max_rel    over elements finite on both sides
    max_ulp             units in the last place, over the same elements

Integers give exact absolute differences; they have no ULPs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mneme_cc.errors import UsageError


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Units in the last place between floats of one type (as float64)."""
    bits = 8 * got.dtype.itemsize
    ints = {16: np.int16, 32: np.int32, 64: np.int64}[bits]
    lowest = -(1 << (bits - 1))

    def line(x: np.ndarray) -> np.ndarray:  # sign-magnitude to a monotonic integer line
        i = x.view(ints).astype(np.int64)
        return np.where(i < 0, lowest - i, i)

    return np.abs(np.subtract(line(got), line(want), dtype=np.float64))


def abs_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| of finite floats as float64, float64 inputs in extended precision."""
    if a.dtype.itemsize == 8 and np.issubdtype(a.dtype, np.floating):
        delta = np.abs(a.astype(np.longdouble) - b.astype(np.longdouble))
        return np.minimum(delta, np.finfo(np.float64).max).astype(np.float64)
    return np.abs(a.astype(np.float64) - b.astype(np.float64))


def relative(delta: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """delta relative to |reference| (infinite where the reference is 0 and they differ)."""
    scale = np.abs(reference.astype(np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, delta / np.where(scale > 0, scale, 1),
                        np.where(delta > 0, np.inf, 0.0))


@dataclass
class BufferDiff:
    name: str
    address: int
    size: int                          # bytes on each side
    bytes_differing: int
    dtype: str | None = None           # None: compared as bytes only
    elements: int = 0
    differing: int = 0                 # elements whose bits differ
    max_abs: float | int | None = None
    max_rel: float | None = None
    max_ulp: int | None = None
    nan_mismatches: int = 0
    inf_mismatches: int = 0
    signed_zeros: int = 0
    trailing_bytes: int = 0            # past the last whole element, compared as bytes
    first: list[dict[str, Any]] = field(default_factory=list)  # index, a, b
    histogram: list[dict[str, Any]] | None = None              # decades of |a - b|

    @property
    def same(self) -> bool:
        return self.bytes_differing == 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def dtype_named(name: str) -> np.dtype:
    try:
        dtype = np.dtype(name)
    except TypeError:
        raise UsageError(f"no dtype {name!r}: use float16/32/64, int8..int64 or "
                         "uint8..uint64") from None
    if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)):
        raise UsageError(f"dtype {name!r} is neither a float nor an integer type")
    return dtype


def _value(x) -> float | int:
    """A JSON-friendly scalar (NaN and infinities stay floats)."""
    return x.item()


def _histogram(magnitudes: np.ndarray) -> list[dict[str, Any]]:
    """Counts of |a - b| per decade [10^k, 10^(k+1))."""
    positive = magnitudes[magnitudes > 0]
    if not positive.size:
        return []
    decades = np.floor(np.log10(positive)).astype(np.int64)
    values, counts = np.unique(decades, return_counts=True)
    return [{"from": 10.0 ** int(k), "to": 10.0 ** (int(k) + 1), "count": int(c)}
            for k, c in zip(values, counts, strict=True)]


def diff_buffer(name: str, address: int, a: np.ndarray, b: np.ndarray,
                dtype: str | np.dtype | None = None, first: int = 8,
                histogram: bool = False) -> BufferDiff:
    """Statistics of b against a (uint8 arrays of one size)."""
    if a.size != b.size:
        raise UsageError(f"{name}: {a.size} bytes on one side, {b.size} on the other")
    byte_differs = a != b
    out = BufferDiff(name, address, int(a.size), int(np.count_nonzero(byte_differs)))
    if dtype is None:
        out.first = [{"index": int(i), "a": int(a[i]), "b": int(b[i])}
                     for i in np.flatnonzero(byte_differs)[:first]]
        return out
    dt = dtype_named(str(dtype)) if not isinstance(dtype, np.dtype) else dtype
    out.dtype = dt.name
    usable = a.size // dt.itemsize * dt.itemsize
    out.trailing_bytes = int(a.size - usable)
    va, vb = a[:usable].view(dt), b[:usable].view(dt)
    out.elements = int(va.size)
    if not out.bytes_differing:  # most buffers: no element work
        return out
    differ = va.view(f"u{dt.itemsize}") != vb.view(f"u{dt.itemsize}")  # bits
    out.differing = int(np.count_nonzero(differ))
    out.first = [{"index": int(i), "a": _value(va[i]), "b": _value(vb[i])}
                 for i in np.flatnonzero(differ)[:first]]
    if not out.differing:
        return out
    ia, ib = va[differ], vb[differ]
    if np.issubdtype(dt, np.floating):
        nan_a, nan_b = np.isnan(ia), np.isnan(ib)
        inf_a, inf_b = np.isinf(ia), np.isinf(ib)
        out.nan_mismatches = int(np.count_nonzero(nan_a != nan_b))
        out.inf_mismatches = int(np.count_nonzero((inf_a | inf_b) & ~(nan_a | nan_b)
                                                  & ~(inf_a & inf_b & (ia == ib))))
        out.signed_zeros = int(np.count_nonzero((ia == 0) & (ib == 0)))
        finite = np.isfinite(ia) & np.isfinite(ib)
        delta = abs_difference(ia[finite], ib[finite])
        if delta.size:
            out.max_abs = float(delta.max())
            out.max_rel = float(relative(delta, ia[finite]).max())
            out.max_ulp = int(ulp_distance(ia[finite], ib[finite]).max())
        magnitudes = delta
    else:
        wide = np.int64 if np.issubdtype(dt, np.signedinteger) else np.uint64
        xa, xb = ia.astype(wide), ib.astype(wide)
        delta = np.where(xa > xb, xa - xb, xb - xa).astype(np.uint64)
        out.max_abs = int(delta.max())
        fa = xa.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(fa != 0, delta.astype(np.float64) / np.abs(fa), math.inf)
        out.max_rel = float(rel.max())
        magnitudes = delta.astype(np.float64)
    if histogram:
        out.histogram = _histogram(magnitudes)
    return out
