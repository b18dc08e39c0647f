"""Search spaces: the parameters a study explores, and the ReplayConfig each
set of parameter values derives.

A space sees the recorded instance and the GPU's queried properties. Its
`dimensions()` list parameters (a parameter with `when` exists only while
another parameter takes one of the given values, so spaces can be
hierarchical); `fields(params)` turns values into ReplayConfig fields;
`derive(params)` makes the grounded config. Fractions are a natural way to
stay within real limits:

    class Blocks(SearchSpace):
        def dimensions(self):
            return [Real("block_fraction", 0.0, 1.0)]

        def fields(self, params):
            sizes = range(32, self.props.max_threads_per_block + 1, 32)
            return {"block": pick(params["block_fraction"], sizes)}
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from mneme_cc.errors import UsageError
from mneme_cc.replay.config import MAX_BLOCK, MAX_GRID, PLAIN_SCALARS, ReplayConfig
from mneme_cc.tune.properties import DeviceProperties


def value_key(value: Any) -> Any:
    """A hashable stand-in for a sampled value: the value with its type where
    it is a plain scalar (1, 1.0 and True stay apart), else its JSON (a user
    space's choice of tuples, say)."""
    if value is None or type(value) in PLAIN_SCALARS:
        return type(value), value
    return json.dumps(value, sort_keys=True, default=repr)

When = tuple[str, tuple[Any, ...]] | None


@dataclass(frozen=True)
class Int:
    name: str
    low: int
    high: int
    step: int = 1
    log: bool = False
    when: When = None

    def values(self) -> list[int]:
        return list(range(self.low, self.high + 1, self.step))


@dataclass(frozen=True)
class Real:
    name: str
    low: float
    high: float
    log: bool = False
    when: When = None

    def values(self) -> list[float]:
        raise UsageError(f"parameter {self.name} is continuous: an exhaustive search needs "
                         "every parameter discrete")


@dataclass(frozen=True)
class Categorical:
    name: str
    choices: tuple[Any, ...]
    when: When = None

    def values(self) -> list[Any]:
        return list(self.choices)


def Bool(name: str, when: When = None) -> Categorical:  # noqa: N802 - reads as a type
    return Categorical(name, (False, True), when)


Dimension = Int | Real | Categorical


def pick(fraction: float, options: Sequence[Any]) -> Any:
    """The option a fraction in [0, 1] selects (0 the first, 1 the last)."""
    options = list(options)
    if not options:
        raise UsageError("nothing to pick from")
    return options[min(int(fraction * len(options)), len(options) - 1)]


def exists(dim: Dimension, params: dict[str, Any]) -> bool:
    """Whether `dim` exists once `params` are chosen (its `when` holds)."""
    if dim.when is None:
        return True
    name, values = dim.when
    return name in params and params[name] in values


def sample_dimensions(dimensions: Sequence[Dimension], trial) -> dict[str, Any]:
    """Values for every one of `dimensions` that exists, asked of an Optuna trial."""
    params: dict[str, Any] = {}
    for dim in dimensions:
        if not exists(dim, params):
            continue
        if isinstance(dim, Int):
            params[dim.name] = trial.suggest_int(dim.name, dim.low, dim.high, step=dim.step,
                                                 log=dim.log)
        elif isinstance(dim, Real):
            params[dim.name] = trial.suggest_float(dim.name, dim.low, dim.high, log=dim.log)
        else:
            params[dim.name] = trial.suggest_categorical(dim.name, dim.choices)
    return params


def distribution_of(dim: Dimension):
    """The Optuna distribution sample_dimensions asks `dim` with (built once:
    a local step's trial is written with its parameters' distributions)."""
    if isinstance(dim, Int | Real):
        key: Any = (type(dim), dim.low, dim.high, dim.log, getattr(dim, "step", None))
    elif all(c is None or type(c) in PLAIN_SCALARS for c in dim.choices):
        key = tuple((type(c), c) for c in dim.choices)  # 1, 1.0 and True stay apart
    else:  # a user space's tuples (their lists' look-alikes): built each time
        return _distribution(dim)
    if (made := _DISTRIBUTIONS.get(key)) is None:
        if len(_DISTRIBUTIONS) >= 4096:
            _DISTRIBUTIONS.clear()
        made = _DISTRIBUTIONS[key] = _distribution(dim)
    return made


def _distribution(dim: Dimension):
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(dim, Int):
        return IntDistribution(dim.low, dim.high, log=dim.log, step=dim.step)
    if isinstance(dim, Real):
        return FloatDistribution(dim.low, dim.high, log=dim.log)
    return CategoricalDistribution(dim.choices)


_DISTRIBUTIONS: dict[Any, Any] = {}


class SearchSpace:
    """A space over one recorded instance on one kind of GPU. Subclass it:
    `dimensions()` and `fields(params)`, optionally `constraints(params)`."""

    #: How each derived config runs (set by the tuner).
    run: dict[str, Any] = {"iterations": 20, "warmup": 1}
    #: Whether the study may change the build's numerics (set by the tuner).
    changes_numerics: bool = False

    def __init__(self, instance, props: DeviceProperties):
        self.instance, self.props = instance, props

    def dimensions(self) -> list[Dimension]:
        return []

    def fields(self, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def constraints(self, params: dict[str, Any]) -> str | None:
        """Why these values must not run (None: they may)."""
        return None

    def calibrate(self, evaluate: Callable[[ReplayConfig], Any]) -> None:
        """Before the study: may replay configurations (`evaluate(config)` gives a
        TrialResult) to learn what is worth searching."""

    def initial_params(self) -> dict[str, Any] | None:
        """Values to try first (the application's settings), or None."""
        return None

    def derive(self, params: dict[str, Any]) -> ReplayConfig:
        """The grounded ReplayConfig for these parameter values (deterministic).
        A kernel that carries a cubin only runs from the application's image."""
        fields = {**self.run, **self.fields(params)}
        if self._cubin_only:
            fields.setdefault("baseline", "original")
        return ReplayConfig(**fields).grounded()

    @functools.cached_property
    def _cubin_only(self) -> bool:
        return self.instance.db.kernel(self.instance.static_hash).provenance == "cubin"

    def baseline(self) -> ReplayConfig:
        """What a speedup is measured against: the application's own kernel."""
        kernel = self.instance.db.kernel(self.instance.static_hash)
        which = "original" if kernel.description.get("image") else "ir"
        return ReplayConfig(baseline=which, **self.run)

    def sample(self, trial) -> dict[str, Any]:
        """Values for every parameter that exists, asked of an Optuna trial."""
        return sample_dimensions(self.dimensions(), trial)

    def distributions(self, params: dict[str, Any],
                      dims: Sequence[Dimension] | None = None) -> dict[str, Any]:
        """The Optuna distribution of each of `params`: what sample() asks with
        (a local step's trial is written with them, one per step). `dims`: the
        space's dimensions, when the caller has them."""
        out: dict[str, Any] = {}
        for dim in self.dimensions() if dims is None else dims:
            if not exists(dim, params):
                continue
            if dim.name not in params:
                raise ValueError(f"parameter {dim.name} exists with these values but has none")
            out[dim.name] = distribution_of(dim)
        return out

    def combinations(self) -> Iterator[dict[str, Any]]:
        """Every set of parameter values, with `when` honoured (discrete spaces
        only), generated in order: the last dimension varies fastest."""
        dims = self.dimensions()
        values = [dim.values() for dim in dims]  # a continuous one refuses here

        def grow(i: int, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
            if i == len(dims):
                yield params
            elif not exists(dims[i], params):
                yield from grow(i + 1, params)
            else:
                for value in values[i]:
                    yield from grow(i + 1, {**params, dims[i].name: value})

        return grow(0, {})


class Combined(SearchSpace):
    """Several spaces as one: their dimensions side by side, fields merged."""

    def __init__(self, instance, props: DeviceProperties, parts: list[type[SearchSpace]]):
        super().__init__(instance, props)
        self.parts = [part(instance, props) for part in parts]

    def dimensions(self) -> list[Dimension]:
        return [d for part in self.parts for d in part.dimensions()]

    def fields(self, params):
        out: dict[str, Any] = {}
        for part in self.parts:
            out.update(part.fields(params))
        return out

    def constraints(self, params):
        return next(filter(None, (part.constraints(params) for part in self.parts)), None)

    def calibrate(self, evaluate):
        for part in self.parts:
            part.calibrate(evaluate)


# --- the built-in spaces ---------------------------------------------------

class Pipelines(SearchSpace):
    """The optimisation level."""

    def dimensions(self):
        return [Categorical("pipeline", tuple(f"default<O{n}>" for n in range(4)))]

    def fields(self, params):
        return {"pipeline": params["pipeline"]}


class TuningOptions(SearchSpace):
    """LLVM's pipeline tuning options, where the level makes them matter."""

    OPTIONS = ("loop_unrolling", "loop_vectorization", "slp_vectorization", "loop_interleaving")

    def dimensions(self):
        when = ("pipeline", ("default<O2>", "default<O3>"))
        return [Bool(name, when) for name in self.OPTIONS]

    def fields(self, params):
        return {"tuning": {n: params[n] for n in self.OPTIONS if n in params}}


class Specialization(SearchSpace):
    """Scalar arguments as constants; launch dimensions as constants."""

    def dimensions(self):
        dims = [Bool("specialize_dims")]
        if self.instance.scalar_params():
            dims.insert(0, Bool("specialize_args"))
        return dims

    def fields(self, params):
        args = self.instance.scalar_params() if params.get("specialize_args") else ()
        return {"specialize_args": args, "specialize_dims": params["specialize_dims"]}


class LaunchBounds(SearchSpace):
    """`__launch_bounds__(block size, min blocks per SM)`."""

    def max_blocks(self) -> int:
        threads = math.prod(self.instance.block)
        return max(1, min(self.props.max_blocks_per_multiprocessor,
                          self.props.max_threads_per_multiprocessor // threads))

    def dimensions(self):
        return [Bool("launch_bounds"),
                Int("min_blocks_per_sm", 1, self.max_blocks(), when=("launch_bounds", (True,)))]

    def fields(self, params):
        return {"launch_bounds": params["launch_bounds"],
                "min_blocks_per_sm": params.get("min_blocks_per_sm")}


class Ptxas(SearchSpace):
    """ptxas's optimisation level and register cap."""

    def dimensions(self):
        return [Int("ptxas_opt_level", 0, 3),
                Categorical("max_registers", (None, 32, 64, 128, 255))]

    def fields(self, params):
        return {"ptxas_opt_level": params["ptxas_opt_level"],
                "max_registers": params["max_registers"]}


class Geometry(SearchSpace):
    """Block shapes, the grid covering the recorded threads.

    A kernel that indexes one element per thread (`i = blockIdx.x *
    blockDim.x + threadIdx.x; if (i < n)`, and likewise in y and z) computes
    the same at every block shape when the grid covers as many threads in
    each dimension as the recording did. A 1-D launch searches the block
    size in warps (`block`); a 2-D or 3-D one the shapes whose sides are
    powers of two (or the recorded side) dividing the recorded threads in
    their dimension (`block_shape`, e.g. "32x4x2"). Subclass with
    `grid_stride = True` for launch-agnostic (grid-stride) 1-D kernels: the
    grid is then searched too, in waves of the SM count.
    """

    grid_stride = False

    def __init__(self, instance, props: DeviceProperties):
        super().__init__(instance, props)
        # A 2-D or 3-D launch: the leading sides calibrate() found free to
        # change (3: every side, 2: x and y, 1: x alone, 0: none, nothing
        # searched).
        self.free_sides = 0
        self._shapes: dict[int, tuple[str, ...]] = {}  # shapes(free), asked for every trial

    def _is_1d(self) -> bool:
        return self.instance.block[1:] == (1, 1) and self.instance.grid[1:] == (1, 1)

    def _threads(self) -> tuple[int, int, int]:
        """The recorded threads in each dimension."""
        return tuple(g * b for g, b in zip(self.instance.grid, self.instance.block, strict=True))

    def shapes(self, free: int = 3) -> tuple[str, ...]:
        """The block shapes covering the recorded threads exactly whose first
        `free` sides may differ from the recorded block's, as `block_shape`
        values: the recorded one first, then the widest."""
        if free in self._shapes:
            return self._shapes[free]
        threads, recorded = self._threads(), tuple(self.instance.block)
        sides = [sorted(s for s in {1 << k for k in range(11)} | {recorded[d]}
                        if s <= MAX_BLOCK[d] and threads[d] % s == 0 and threads[d] // s <= MAX_GRID[d]
                        and (d < free or s == recorded[d]))
                 for d in range(3)]
        fits = [shape for shape in itertools.product(*sides)
                if shape == recorded or (math.prod(shape) % self.props.warp_size == 0
                                         and math.prod(shape) <= self.props.max_threads_per_block)]
        fits.sort(key=lambda shape: (shape != recorded, [-side for side in shape]))
        self._shapes[free] = tuple(shape_name(shape) for shape in fits)
        return self._shapes[free]

    def probe(self, free: int = 3) -> tuple[int, int, int] | None:
        """Another shape whose first `free` sides may differ: with two or
        three, one of as many threads differing in as many of them as can be
        (then the widest); with x alone, the x side nearest half the
        recorded one. None: there is none."""
        recorded = tuple(self.instance.block)
        others = [s for s in map(parse_shape, self.shapes(free)) if s != recorded]
        if free == 1:
            return min(others, key=lambda s: (abs(math.log2(2 * s[0] / recorded[0])), s[0]),
                       default=None)
        others = [s for s in others if math.prod(s) == math.prod(recorded)]
        return max(others, key=lambda s: (sum(a != b for a, b in zip(s, recorded, strict=True)),
                                          s[0]), default=None)

    @functools.cached_property
    def sides_read(self) -> frozenset[str] | None:
        """The sides whose block or grid size the kernel's module reads (None:
        not known)."""
        from mneme_cc.tune.block_reads import sides_read

        return sides_read(self.instance.db.kernel(self.instance.static_hash))

    def may_change(self, block: tuple[int, int, int]) -> bool:
        """Whether a replay under `block` could verify: it moves no side whose
        sizes the kernel is known not to read (a fault there would restart
        the GPU worker for nothing)."""
        read = self.sides_read
        return read is None or all(
            side in read for side, new, old in zip("xyz", block, self.instance.block, strict=True)
            if new != old)

    def find_free_sides(self, evaluate: Callable[[ReplayConfig], Any],
                        settings: ReplayConfig) -> None:
        """A 2-D or 3-D launch: replays `settings` under another shape, every
        side changed where it can be, else x alone; the first that verifies
        says which sides are searched (free_sides). Where every side would
        move one whose sizes the kernel never reads, x and y are tried in
        its place."""
        self.free_sides = 0
        skipped = False
        for free in (3, 2, 1):
            shape = self.probe(free)
            if shape is None or (free == 2 and not skipped):
                continue
            if not self.may_change(shape):
                skipped = True
                continue
            if evaluate(dataclasses.replace(settings, **self.covering(shape))).verified:
                self.free_sides = free
                return

    def calibrate(self, evaluate: Callable[[ReplayConfig], Any]) -> None:
        if not self._is_1d() and not self.grid_stride:
            self.find_free_sides(evaluate, self.derive(self.initial_params() or {}))

    def covering(self, block: tuple[int, int, int]) -> dict[str, Any]:
        """The fields that launch `block` over the recorded threads."""
        threads = self._threads()
        if any(t % b for t, b in zip(threads, block, strict=True)):
            raise UsageError(f"block shape {shape_name(block)} does not divide the recorded "
                             f"threads {shape_name(threads)} in each dimension")
        return {"block": tuple(block),
                "grid": tuple(t // b for t, b in zip(threads, block, strict=True))}

    def dimensions(self):
        if not self._is_1d():
            shapes = self.shapes(self.free_sides) if self.free_sides else ()
            return [Categorical("block_shape", shapes)] if len(shapes) > 1 else []
        warp = self.props.warp_size
        dims: list[Dimension] = [Int("block", warp, self.props.max_threads_per_block, step=warp)]
        if self.grid_stride:
            dims.append(Int("waves", 1, 32))
        return dims

    def fields(self, params):
        if "block_shape" in params:
            return self.covering(parse_shape(params["block_shape"]))
        if "block" not in params:
            return {}
        block = params["block"]
        if self.grid_stride:
            per_sm = max(1, self.props.max_threads_per_multiprocessor // block)
            grid = params["waves"] * self.props.multiprocessors * per_sm
        else:
            threads = self.instance.grid[0] * self.instance.block[0]
            grid = -(-threads // block)
        return {"block": (block, 1, 1), "grid": (grid, 1, 1)}


def shape_name(shape: Sequence[int]) -> str:
    """`32x4x2`: a block shape as a categorical value."""
    return "x".join(map(str, shape))


def parse_shape(name: str) -> tuple[int, int, int]:
    x, y, z = (int(side) for side in name.split("x"))
    return x, y, z


class GridStrideGeometry(Geometry):
    grid_stride = True
