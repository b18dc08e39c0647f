"""Local steps around the best configurations found so far.

TPE's every ask rebuilds its estimators over a window of a few hundred
trials (tpe_window.py): milliseconds, more than a short kernel's trial
takes on the GPU, and late in a study most of what it proposes has run.
Once a study has verified configurations, the tuner fills part of its asks
with neighbours of the best few instead: one parameter moved to another
value (the parameters that then exist or cease to exist follow), created as
a running trial in one write (ownership.start_owned_trial), no sampling. It
is also the search a tuner wants late in a study: small moves from what is
fastest.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from typing import Any

from mneme_cc.tune.space import Categorical, Dimension, Int, Real, SearchSpace, exists

#: Verified trials a study needs before local steps start.
WARM_UP = 16
#: The share of asks left to the sampler once local steps start; it falls as
#: the study grows (the best's neighbourhood is where a late study searches)
#: and with how often the sampler proposes what already ran (an ask paid for
#: nothing).
SAMPLER_SHARE, SAMPLER_SHARE_SCALE = 0.25, 100.0
#: How fast the sampler's repeat rate follows its recent proposals.
REPEAT_WEIGHT = 0.1
#: How many of the best configurations local steps start from.
INCUMBENTS = 5
#: A step moves at most MOST_MOVES parameters, drawing ATTEMPTS neighbours
#: at each number of moves before it moves one more; before it moves two, it
#: takes one of the one-parameter steps not run yet.
ATTEMPTS, MOST_MOVES = 8, 3


def _other_values(dim: Categorical | Int, current: Any) -> list[Any]:
    """The values a step may move a discrete dimension to: another choice, or
    an integer one or two steps away."""
    if isinstance(dim, Categorical):
        return [c for c in dim.choices if c != current]
    here, last = (current - dim.low) // dim.step, (dim.high - dim.low) // dim.step
    return [dim.low + i * dim.step for i in range(here - 2, here + 3)
            if i != here and 0 <= i <= last]


def _other_value(dim: Dimension, current: Any, rng: random.Random) -> Any:
    if isinstance(dim, Categorical | Int):
        others = _other_values(dim, current)
        return rng.choice(others) if others else current
    assert isinstance(dim, Real)
    if dim.log and dim.low > 0:
        value = math.exp(math.log(current) + rng.gauss(0.0, 0.3))
    else:
        value = current + rng.gauss(0.0, 0.15 * (dim.high - dim.low))
    return min(max(value, dim.low), dim.high)


def _fresh_value(dim: Dimension, rng: random.Random) -> Any:
    if isinstance(dim, Categorical):
        return rng.choice(dim.choices)
    if isinstance(dim, Int):
        return dim.low + rng.randrange((dim.high - dim.low) // dim.step + 1) * dim.step
    return rng.uniform(dim.low, dim.high)


def neighbour(space: SearchSpace, params: dict[str, Any], rng: random.Random,
              dims: list[Dimension] | None = None) -> dict[str, Any] | None:
    """`params` with one parameter moved; None when the space has nothing to move.
    `dims`: the space's dimensions, when the caller has them."""
    dims = dims if dims is not None else space.dimensions()
    movable = [d for d in dims if d.name in params]
    if not movable:
        return None
    moved = rng.choice(movable)
    return _moved(dims, params, moved, _other_value(moved, params[moved.name], rng), rng)


def _moved(dims: list[Dimension], params: dict[str, Any], moved: Dimension, value: Any,
           rng: random.Random) -> dict[str, Any]:
    """`params` with `moved` set to `value`: the parameters that then exist and had
    no value take a random one, those that cease to exist go."""
    out: dict[str, Any] = {}
    for dim in dims:  # in order, so a `when` sees the values it depends on
        if not exists(dim, out):
            continue
        if dim is moved:
            out[dim.name] = value
        elif dim.name in params:
            out[dim.name] = params[dim.name]
        else:
            out[dim.name] = _fresh_value(dim, rng)
    return out


def one_parameter_steps(dims: list[Dimension], params: dict[str, Any],
                        rng: random.Random) -> Iterator[dict[str, Any]]:
    """Every step that moves one parameter of `params` as neighbour() may (a real
    one by a single random draw)."""
    for dim in dims:
        if dim.name not in params:
            continue
        current = params[dim.name]
        values = _other_values(dim, current) if isinstance(dim, Categorical | Int) \
            else [_other_value(dim, current, rng)]
        for value in values:
            yield _moved(dims, params, dim, value, rng)


class LocalSteps:
    """The best configurations of a one-objective study, and steps from them."""

    def __init__(self, space: SearchSpace, seed: int | None):
        self.space, self.rng = space, random.Random(seed)
        self.best: list[tuple[float, dict[str, Any]]] = []  # (value, params), best first
        self.repeats = 0.0  # the share of the sampler's recent proposals that had run
        # The best's one-parameter steps not run yet, listed once random draws
        # stop finding them (late in a study, where most have run: what ran
        # stays run, so the list only shrinks until the best change).
        self.near: list[dict[str, Any]] | None = None
        # The dimensions the last step was drawn from (its trial is written
        # with their distributions: a space builds them afresh each time).
        self.dims: list[Dimension] = []

    def found(self, value: float, params: dict[str, Any]) -> None:
        """A verified configuration's objective value."""
        best = sorted([*self.best, (value, params)], key=lambda x: x[0])[:INCUMBENTS]
        if best != self.best:  # new steps to take
            self.near = None
        self.best = best

    def sampled(self, repeated: bool) -> None:
        """What the sampler's last proposal was: a configuration that had run, or not."""
        self.repeats += REPEAT_WEIGHT * (float(repeated) - self.repeats)

    def propose(self, verified: int, untried: Callable[[dict[str, Any]], bool]) \
            -> dict[str, Any] | None:
        """For a study with `verified` trials: a neighbour of one of the best that
        `untried` accepts, or None to let the sampler choose."""
        share = min(SAMPLER_SHARE, SAMPLER_SHARE_SCALE / max(verified, 1)) * (1 - self.repeats)
        if verified < WARM_UP or not self.best or self.rng.random() < share:
            return None
        self.dims = dims = self.space.dimensions()  # built once per step

        def new(params: dict[str, Any]) -> bool:  # each check costs a derive, once
            return self.space.constraints(params) is None and untried(params)

        # One parameter moved, then two, then three, as the near ones run out.
        if self.near is None:
            for _ in range(ATTEMPTS):
                if (step := self._draw(1, dims)) is None or new(step):
                    return step
            # None found: the ones left, listed once.
            self.near = [step for _, params in self.best
                         for step in one_parameter_steps(dims, params, self.rng) if new(step)]
            self.rng.shuffle(self.near)
        while self.near:  # a listed step may have run since
            if new(step := self.near.pop()):
                return step
        for attempt in range(ATTEMPTS, ATTEMPTS * MOST_MOVES):
            if (step := self._draw(1 + attempt // ATTEMPTS, dims)) is None or new(step):
                return step
        return None

    def _draw(self, moves: int, dims: list[Dimension]) -> dict[str, Any] | None:
        """One of the best with `moves` parameters moved at random; None when the
        space has nothing to move."""
        params: dict[str, Any] | None = self.rng.choice(self.best)[1]
        for _ in range(moves):
            params = neighbour(self.space, params, self.rng, dims)
            if params is None:
                return None
        return params
