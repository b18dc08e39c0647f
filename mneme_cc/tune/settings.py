"""What one `mneme tune` study is asked to do: its space, sampler, budget and
how each trial runs."""

from __future__ import annotations

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
    trial_timeout: float = 60.0
    compile_timeout: float = 60.0          # seconds one compile may take
    iterations: int = 20
    warmup: int = 3
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
