"""What one `mneme tune` study is asked to do: its space, sampler, budget and
how each trial runs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TuneSettings:
    space: str = "auto"
    sampler: str = "tpe"
    trials: int = 100
    timeout: float | None = None           # seconds for the whole study
    objectives: list[str] = field(default_factory=lambda: ["time"])
    devices: list[int] = field(default_factory=lambda: [0])
    compile_workers: int | None = None
    askers: int | None = None              # processes asking the sampler; None: by the cores
    trial_timeout: float = 60.0
    compile_timeout: float = 60.0          # seconds one compile may take
    iterations: int | None = None          # None: from the kernel's time (timed_launches)
    warmup: int | None = None
    storage: str | None = None             # default: a journal file in the output directory
    study_name: str | None = None
    resume: bool = False
    seed: int | None = None
    out_dir: Path | None = None            # default: <database>/tune/<study>
    cache_dir: Path | None = None
    # Per-buffer verification policies for every trial (docs/replay.md); {}: bitwise.
    verify: dict[str, Any] = field(default_factory=dict)
    # Run configurations that change the build's numerics in a bitwise study too.
    allow_numerics_change: bool = False
    # A new study first tries what won in related studies (mneme_cc.tune.warm_start).
    warm_start: bool = True
    # A trial whose first timed launches are all clearly slower than the best
    # so far (tuner.race_threshold) stops timing (LaunchTimer); one-objective
    # time studies only.
    race: bool = True
    # With several devices, a tuning loop per device, each in its own process
    # on the study (mneme_cc.tune.device_loops); else one loop feeds them all.
    loop_per_device: bool = True


#: Timed launches per trial when the study is not told: enough to cover
#: TIMED_WINDOW_MS of kernel time, within these bounds, so that a long kernel's
#: trials are not mostly repeated launches.
MOST_ITERATIONS, FEWEST_ITERATIONS, TIMED_WINDOW_MS = 20, 5, 5.0
#: Untimed launches first: one loads the variant and warms the caches after
#: the restore. Three for a 0.16 ms kernel moved neither its best nor its
#: baseline and cost 28% of its study's pace (docs/tune.md, *Timed launches*).
WARMUP = 1


def timed_launches(settings: TuneSettings, kernel_ms: float | None) -> tuple[int, int]:
    """(iterations, warmup) for the study's trials, given the application's
    kernel time (None before it is known); what the user set wins."""
    chosen = _chosen(settings, _automatic(kernel_ms))
    return chosen["iterations"], chosen["warmup"]


def _automatic(kernel_ms: float | None) -> dict[str, int]:
    """What a trial times when the user did not say, for a kernel of kernel_ms."""
    if kernel_ms is None or kernel_ms <= 0:
        return {"iterations": MOST_ITERATIONS, "warmup": WARMUP}
    return {"iterations": max(FEWEST_ITERATIONS,
                              min(MOST_ITERATIONS, math.ceil(TIMED_WINDOW_MS / kernel_ms))),
            "warmup": WARMUP}


def _chosen(settings: TuneSettings, automatic: dict[str, int]) -> dict[str, int]:
    return {k: automatic[k] if getattr(settings, k) is None else getattr(settings, k)
            for k in ("iterations", "warmup")}


def study_timed_launches(study, settings: TuneSettings, kernel_ms: float | None) -> dict[str, int]:
    """{"iterations", "warmup"} for a study's trials: what the user set, else
    what the first process on the study chose (kept in the study, so every
    process and every resume times alike and shares configuration keys)."""
    kept = study.user_attrs.get("timed_launches")
    sound = isinstance(kept, dict) and all(
        type(kept.get(k)) is int and kept[k] >= least for k, least in (("iterations", 1),
                                                                         ("warmup", 0)))
    if not sound:  # none yet, or a damaged one: choose again
        kept = _automatic(kernel_ms)
        study.set_user_attr("timed_launches", kept)
    return _chosen(settings, kept)
