"""What a study's best is worth against the application's own kernel.

The application's kernel is a candidate in every study: a study whose best
verified configuration is slower deploys nothing, and its speedup is 1.0.
"""

from __future__ import annotations


def measured_speedup(baseline, best) -> float | None:
    """The application's kernel time over the best's, as measured (may be < 1)."""
    if best and baseline and baseline.verified:
        return baseline.median_ms / best.median_ms
    return None


def beats_application(baseline, best) -> bool:
    """The best is faster than the application's kernel (or that kernel could not
    be timed verified, so nothing is known to be faster)."""
    measured = measured_speedup(baseline, best)
    return best is not None and (measured is None or measured > 1.0)


def speedup(baseline, best) -> float | None:
    """What deploying the study's result gains: never below 1."""
    measured = measured_speedup(baseline, best)
    return None if measured is None else max(measured, 1.0)


def verdict(baseline, best) -> str:
    if best is None:
        return "no configuration verified"
    if not (baseline and baseline.verified):
        return "verified, but the application's own kernel was not timed (no comparison)"
    if not beats_application(baseline, best):
        return "no configuration beat the application"
    return "faster than the application"


def against_application(baseline, best) -> dict:
    """The summary's fields: speedup, measured_speedup and verdict."""
    return {"speedup": speedup(baseline, best),
            "measured_speedup": measured_speedup(baseline, best),
            "verdict": verdict(baseline, best)}
