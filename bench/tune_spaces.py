"""The 200-configuration spaces that bench/tune_throughput.py tunes.

    Geometry200   block size (8) x grid (25) of a grid-stride kernel: one
                  binary, 200 launch shapes; what Kernel Tuner can also express
    Compile200    pipeline (4) x register cap (5) x dimension specialisation (2)
                  x block size (5): 200 distinct binaries
"""

from __future__ import annotations

from mneme_cc.tune.space import Bool, Categorical, SearchSpace

BLOCKS = (32, 64, 128, 256, 384, 512, 768, 1024)


def grid_choices(props) -> tuple[int, ...]:
    """25 grids from a quarter wave to 16 waves of the SM count."""
    sm = props.multiprocessors
    return tuple(sorted({max(1, round(sm * f)) for f in
                         (0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7,
                          7.5, 8, 9, 10, 11, 12, 13, 14, 16)}))


class Geometry200(SearchSpace):
    def dimensions(self):
        return [Categorical("block", BLOCKS), Categorical("grid", grid_choices(self.props))]

    def fields(self, params):
        return {"block": (params["block"], 1, 1), "grid": (params["grid"], 1, 1)}


class Compile200(SearchSpace):
    def dimensions(self):
        return [Categorical("pipeline", tuple(f"default<O{n}>" for n in range(4))),
                Categorical("max_registers", (None, 32, 64, 128, 255)),
                Bool("specialize_dims"),
                Categorical("block", (64, 128, 256, 512, 1024))]

    def fields(self, params):
        block = params["block"]
        threads = self.instance.grid[0] * self.instance.block[0]
        return {"pipeline": params["pipeline"], "max_registers": params["max_registers"],
                "specialize_dims": params["specialize_dims"],
                "block": (block, 1, 1), "grid": (-(-threads // block), 1, 1)}
