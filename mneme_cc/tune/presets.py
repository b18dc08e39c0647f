"""The search spaces `mneme tune --space` names: presets of the building
blocks in space.py, the `auto` space, or a SearchSpace class in a file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mneme_cc.errors import UsageError
from mneme_cc.tune.auto import auto_space
from mneme_cc.tune.properties import DeviceProperties
from mneme_cc.tune.space import (
    Combined,
    Geometry,
    GridStrideGeometry,
    LaunchBounds,
    Pipelines,
    Ptxas,
    SearchSpace,
    Specialization,
    TuningOptions,
)

PRESETS: dict[str, list[type[SearchSpace]]] = {
    "quick": [Pipelines, Specialization],
    "standard": [Pipelines, Specialization, LaunchBounds, Ptxas],
    # What a PROTEUS_TUNED_KERNELS entry can carry: no ptxas options, no geometry.
    "proteus": [Pipelines, Specialization, LaunchBounds],
    "full": [Pipelines, TuningOptions, Specialization, LaunchBounds, Ptxas, Geometry],
    # What a kernel carrying PTX and no IR can take (docs/any-kernel.md).
    "ptx": [LaunchBounds, Ptxas],
    "geometry": [Geometry],
    "grid-stride": [GridStrideGeometry],
}


def check_space_name(spec: str) -> None:
    """A one-line UsageError unless spec names a space: auto, a preset or a
    `path.py:Class` (whose file is read only when the space is made)."""
    if spec == "auto" or spec in PRESETS or (":" in spec and
                                              spec.split(":")[0].endswith(".py")):
        return
    raise UsageError(f"unknown space '{spec}': use one of auto, {', '.join(PRESETS)} or "
                     "path.py:Class")


def load_space(spec: str, instance, props: DeviceProperties) -> SearchSpace:
    """A preset name, `a,b` preset parts, or `path.py:Class`."""
    if ":" in spec and spec.split(":")[0].endswith(".py"):
        path, _, name = spec.partition(":")
        if not Path(path).is_file():
            raise UsageError(f"--space {spec}: {path} does not exist")
        module_spec = importlib.util.spec_from_file_location(f"mneme_space_{Path(path).stem}",
                                                             path)
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's file: say what went wrong
            raise UsageError(f"--space {spec}: {path} failed to load: "
                             f"{type(exc).__name__}: {exc}") from None
        cls = getattr(module, name, None)
        if not (isinstance(cls, type) and issubclass(cls, SearchSpace)):
            raise UsageError(f"--space {spec}: {path} has no SearchSpace subclass {name}")
        return cls(instance, props)
    if spec == "auto":
        return auto_space(instance, props)
    check_space_name(spec)
    kernel = instance.db.kernel(instance.static_hash)
    fits = {"ir": PRESETS, "ptx": ("ptx", "geometry", "grid-stride"),
            "cubin": ("geometry", "grid-stride")}[kernel.provenance]
    if spec not in fits:
        raise UsageError(f"--space {spec}: {kernel.demangled} carries "
                         f"{'PTX' if kernel.provenance == 'ptx' else 'a cubin only'}, no IR; "
                         f"use --space auto or one of {', '.join(fits)}")
    return Combined(instance, props, PRESETS[spec])
