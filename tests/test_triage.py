"""CPU tier: element statistics of buffer differences (mneme diff)."""

from __future__ import annotations

import numpy as np
import pytest

from mneme_cc.errors import UsageError
from mneme_cc.triage.stats import diff_buffer


def raw(values, dtype) -> np.ndarray:
    return np.asarray(values, dtype=dtype).view(np.uint8)


def test_identical_buffers_are_the_same_in_every_dtype():
    data = np.arange(64, dtype=np.uint8)
    for dtype in (None, "float16", "float32", "float64", "int8", "uint16", "int32", "uint64"):
        d = diff_buffer("x", 0, data, data.copy(), dtype)
        assert d.same and d.differing == 0 and d.first == []


def test_float32_nan_inf_signed_zero_and_ulps():
    nan_a = np.array([0x7FC00001], np.uint32).view(np.float32)[0]  # another NaN payload
    a = raw([1.0, 2.0, np.nan, np.inf, 0.0, 5.0, -np.inf, np.nan], np.float32)
    b = raw([1.0, np.nextafter(np.float32(2), np.float32(3)), 1.0, np.inf, -0.0, 5.5, np.inf,
             nan_a], np.float32)
    d = diff_buffer("x", 0x10, a, b, "float32", first=10)
    assert d.elements == 8 and d.differing == 6  # bits differ: 1, 2, 4, 5, 6, 7
    assert [f["index"] for f in d.first] == [1, 2, 4, 5, 6, 7]
    assert d.nan_mismatches == 1          # index 2 (both NaN at 7: no mismatch)
    assert d.inf_mismatches == 1          # index 6: -inf against +inf
    assert d.signed_zeros == 1            # index 4
    # Finite on both sides: indices 1, 4, 5. 5.0 -> 5.5 is 0.5 / 2^-21 ulps.
    assert d.max_abs == 0.5 and d.max_rel == pytest.approx(0.1)
    assert d.max_ulp == 2 ** 20
    assert d.first[3] == {"index": 5, "a": 5.0, "b": 5.5}
    assert d.bytes_differing == int(np.count_nonzero(a != b))


def test_float64_and_float16_ulps_and_relative_to_side_a():
    a64 = raw([1e300, -3.0, 0.0], np.float64)
    b64 = raw([-1e300, np.nextafter(-3.0, -4.0), 1e-300], np.float64)
    d = diff_buffer("x", 0, a64, b64, "float64")
    assert d.max_abs == pytest.approx(2e300)         # no overflow to inf
    assert d.max_rel == np.inf                        # 0 -> 1e-300: relative to a zero
    assert d.differing == 3 and d.nan_mismatches == d.inf_mismatches == 0
    d16 = diff_buffer("x", 0, raw([1.0, 2.0], np.float16),
                      raw([1.0009765625, 2.0], np.float16), "float16")
    assert (d16.differing, d16.max_ulp, d16.max_abs) == (1, 1, 0.0009765625)


def test_integers_are_exact_at_their_extremes():
    d = diff_buffer("x", 0, raw([-128, 127, 5], np.int8), raw([127, -128, 5], np.int8), "int8")
    assert (d.differing, d.max_abs, d.max_ulp) == (2, 255, None)
    top = 2 ** 64 - 1
    d = diff_buffer("x", 0, raw([0, top], np.uint64), raw([top, 0], np.uint64), "uint64")
    assert d.max_abs == top and d.max_rel == np.inf
    d = diff_buffer("x", 0, raw([-2 ** 63], np.int64), raw([2 ** 63 - 1], np.int64), "int64")
    assert d.max_abs == top and d.max_rel == pytest.approx(top / 2 ** 63)
    d = diff_buffer("x", 0, raw([10, 20], np.int32), raw([12, 20], np.int32), "int32")
    assert (d.max_abs, d.max_rel, d.first) == (2, 0.2, [{"index": 0, "a": 10, "b": 12}])


def test_bytes_trailing_bytes_and_histogram():
    a = np.arange(10, dtype=np.uint8)
    b = a.copy()
    b[[3, 9]] = 200
    d = diff_buffer("x", 0, a, b)
    assert (d.bytes_differing, d.dtype) == (2, None)
    assert d.first == [{"index": 3, "a": 3, "b": 200}, {"index": 9, "a": 9, "b": 200}]
    d = diff_buffer("x", 0, a, b, "float32")   # 2 whole floats and 2 trailing bytes
    assert (d.elements, d.trailing_bytes, d.differing, d.bytes_differing) == (2, 2, 1, 2)
    a = raw([1.0, 1.0, 1.0, 1.0], np.float64)
    b = raw([1.5, 1.05, 1.06, 1.0 + 2e-9], np.float64)
    d = diff_buffer("x", 0, a, b, "float64", histogram=True)
    assert [(h["from"], h["count"]) for h in d.histogram] == [(1e-9, 1), (0.01, 2), (0.1, 1)]


def test_bad_input_is_one_clear_error():
    with pytest.raises(UsageError, match="x: 4 bytes on one side, 8 on the other"):
        diff_buffer("x", 0, np.zeros(4, np.uint8), np.zeros(8, np.uint8))
    with pytest.raises(UsageError, match="no dtype 'float33'"):
        diff_buffer("x", 0, np.zeros(4, np.uint8), np.zeros(4, np.uint8), "float33")
    with pytest.raises(UsageError, match="neither a float nor an integer"):
        diff_buffer("x", 0, np.zeros(4, np.uint8), np.zeros(4, np.uint8), "complex64")
