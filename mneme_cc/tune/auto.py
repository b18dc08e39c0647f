"""`auto`, the default space: per kernel, what can make it faster.

Pipelines `default<O1..O3>` with LLVM's unroll and vectorize options, scalar
arguments and launch dimensions as constants, launch bounds with min blocks
per SM, ptxas's level and register cap, the multiply-add contraction mode
where the study may change numerics, and the block size when the kernel is
launch-agnostic: before the study, `calibrate()` replays it once under
another geometry covering the same threads, and only if that verifies is
geometry searched (1-D: block sizes that divide the recorded thread count;
2-D and 3-D: block shapes that divide it in each dimension).
The first trial is the application's own settings (the `ir` baseline's
configuration), so the sampler starts from what the build did.

A kernel without IR gets `AutoWithoutIR`, what it carries allows
(docs/any-kernel.md); `auto_space` picks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from mneme_cc.replay.config import ReplayConfig
from mneme_cc.tune.space import (
    Categorical,
    Dimension,
    Geometry,
    Int,
    LaunchBounds,
    SearchSpace,
    Specialization,
    TuningOptions,
    shape_name,
)

REGISTER_CAPS = (None, 32, 40, 48, 64, 80, 96, 128, 168, 255)


class Auto(SearchSpace):
    def __init__(self, instance, props):
        super().__init__(instance, props)
        self.bounds = LaunchBounds(instance, props)
        self.geometry = Geometry(instance, props)
        self.launch_agnostic = False
        kernel = instance.db.kernel(instance.static_hash)
        self.level = 3
        if kernel.has_ir:
            from mneme_cc.replay.compiling.numerics import codegen_of

            level = codegen_of(kernel).opt_level  # "0".."3", "s", "z"
            self.level = min(3, max(1, int(level))) if level.isdigit() else 2

    def calibrate(self, evaluate: Callable[[ReplayConfig], Any]) -> None:
        """Searches the block shape only if another geometry verifies (not
        tried where it moves a side whose sizes the kernel never reads)."""
        inst = self.instance
        # The build's own settings with only the geometry changed, so that a
        # failure means the geometry, not the numerics.
        settings = self.derive(self.initial_params())
        if not self.geometry._is_1d():
            self.geometry.find_free_sides(evaluate, settings)
            self.launch_agnostic = self.geometry.free_sides > 0
            return
        threads = inst.block[0]
        if threads % (2 * self.props.warp_size) or not self.geometry.may_change(
                (threads // 2, 1, 1)):
            return
        probe = dataclasses.replace(settings, **self.geometry.covering((threads // 2, 1, 1)))
        self.launch_agnostic = bool(evaluate(probe).verified)

    def geometry_dimensions(self) -> list[Dimension]:
        """The block size (1-D) or shape, once calibrate() found the kernel
        launch-agnostic."""
        if not self.launch_agnostic:
            return []
        if self.geometry._is_1d():
            return [Categorical("block", self.block_sizes())]
        return self.geometry.dimensions()

    def geometry_initial(self) -> dict[str, Any]:
        """The recorded geometry, as a value of geometry_dimensions()."""
        names = {d.name for d in self.geometry_dimensions()}
        if "block" in names:
            return {"block": self.instance.block[0]}
        if "block_shape" in names:
            return {"block_shape": shape_name(self.instance.block)}
        return {}

    def dimensions(self) -> list[Dimension]:
        dims: list[Dimension] = [
            Categorical("pipeline", tuple(f"default<O{n}>" for n in (1, 2, 3))),
            *TuningOptions(self.instance, self.props).dimensions(),
            *Specialization(self.instance, self.props).dimensions(),
            *self.bounds.dimensions(),
            Int("ptxas_opt_level", 1, 3),
            Categorical("max_registers", REGISTER_CAPS),
        ]
        if self.run.get("verify") or self.changes_numerics:
            dims.append(Categorical("fp_contract", (None, "fast", "on", "off")))
        return dims + self.geometry_dimensions()

    def block_sizes(self) -> tuple[int, ...]:
        """Warp multiples that divide the recorded threads: the grid then covers
        exactly as many threads as the application launched."""
        threads = self.instance.grid[0] * self.instance.block[0]
        warp = self.props.warp_size
        return tuple(b for b in range(warp, self.props.max_threads_per_block + 1, warp)
                     if threads % b == 0)

    def fields(self, params: dict[str, Any]) -> dict[str, Any]:
        out = {"pipeline": params["pipeline"],
               "ptxas_opt_level": params["ptxas_opt_level"],
               "max_registers": params["max_registers"],
               "fp_contract": params.get("fp_contract")}
        out.update(TuningOptions(self.instance, self.props).fields(params))
        out.update(Specialization(self.instance, self.props).fields(params))
        out.update(self.bounds.fields(params))
        out.update(self.geometry.fields(params))
        return out

    def initial_params(self) -> dict[str, Any]:
        """The application's own settings, as values of this space's parameters."""
        params: dict[str, Any] = {"pipeline": f"default<O{self.level}>", "ptxas_opt_level": 3,
                                  "max_registers": None, "specialize_dims": False,
                                  "launch_bounds": False}
        if self.level >= 2:
            params.update({name: True for name in TuningOptions.OPTIONS})
        if self.instance.scalar_params():
            params["specialize_args"] = False
        if self.run.get("verify") or self.changes_numerics:
            params["fp_contract"] = None
        return params | self.geometry_initial()


class AutoWithoutIR(Auto):
    """`auto` for a kernel that carries PTX (launch bounds, the register cap,
    ptxas's level where the study may change numerics, since the level may
    contract what the PTX leaves unfused, and the block size) or a cubin
    only (the block size, run from the application's image)."""

    def __init__(self, instance, props):
        super().__init__(instance, props)
        self.has_ptx = instance.db.kernel(instance.static_hash).provenance == "ptx"

    def _ptxas_levels(self) -> bool:
        return self.has_ptx and bool(self.run.get("verify") or self.changes_numerics)

    def dimensions(self) -> list[Dimension]:
        dims: list[Dimension] = []
        if self.has_ptx:
            dims += [*self.bounds.dimensions(),
                     *([Int("ptxas_opt_level", 1, 3)] if self._ptxas_levels() else []),
                     Categorical("max_registers", REGISTER_CAPS)]
        return dims + self.geometry_dimensions()

    def fields(self, params: dict[str, Any]) -> dict[str, Any]:
        out = self.geometry.fields(params)
        if self.has_ptx:
            out.update({"ptxas_opt_level": params.get("ptxas_opt_level", 3),
                        "max_registers": params["max_registers"], **self.bounds.fields(params)})
        return out

    def initial_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.has_ptx:
            params.update(max_registers=None, launch_bounds=False)
        if self._ptxas_levels():
            params["ptxas_opt_level"] = 3
        return params | self.geometry_initial()


def auto_space(instance, props) -> Auto:
    """The `auto` space for what the instance's kernel carries."""
    kernel = instance.db.kernel(instance.static_hash)
    return (Auto if kernel.has_ir else AutoWithoutIR)(instance, props)
