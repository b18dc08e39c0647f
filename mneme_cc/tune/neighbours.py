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
from collections.abc import Callable
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
#: at each number of moves before it moves one more.
ATTEMPTS, MOST_MOVES = 8, 3


def _other_value(dim: Dimension, current: Any, rng: random.Random) -> Any:
    if isinstance(dim, Categorical):
        others = [c for c in dim.choices if c != current]
        return rng.choice(others) if others else current
    if isinstance(dim, Int):
        here, last = (current - dim.low) // dim.step, (dim.high - dim.low) // dim.step
        near = [i for i in range(here - 2, here + 3) if i != here and 0 <= i <= last]
        return dim.low + rng.choice(near) * dim.step if near else current
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
    out: dict[str, Any] = {}
    for dim in dims:  # in order, so a `when` sees the values it depends on
        if not exists(dim, out):
            continue
        if dim is moved:
            out[dim.name] = _other_value(dim, params[dim.name], rng)
        elif dim.name in params:
            out[dim.name] = params[dim.name]
        else:
            out[dim.name] = _fresh_value(dim, rng)
    return out


class LocalSteps:
    """The best configurations of a one-objective study, and steps from them."""

    def __init__(self, space: SearchSpace, seed: int | None):
        self.space, self.rng = space, random.Random(seed)
        self.best: list[tuple[float, dict[str, Any]]] = []  # (value, params), best first
        self.repeats = 0.0  # the share of the sampler's recent proposals that had run
        # How many parameters the last step moved: where the next step starts.
        # The best's near neighbours only run out (what ran stays run), so a
        # late study's steps need not draw them again and again to find so.
        self.moves = 1

    def found(self, value: float, params: dict[str, Any]) -> None:
        """A verified configuration's objective value."""
        best = sorted([*self.best, (value, params)], key=lambda x: x[0])[:INCUMBENTS]
        if best != self.best:  # new neighbours to take one step to
            self.moves = 1
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
        dims = self.space.dimensions()  # built once: a space builds them afresh
        # Tries to find one not run yet (each costs a derive): one parameter
        # moved, then two, then three, as the near ones run out.
        for attempt in range(ATTEMPTS * (self.moves - 1), ATTEMPTS * MOST_MOVES):
            params, moves = self.rng.choice(self.best)[1], 1 + attempt // ATTEMPTS
            for _ in range(moves):
                params = neighbour(self.space, params, self.rng, dims)
                if params is None:
                    return None
            if self.space.constraints(params) is None and untried(params):
                self.moves = moves
                return params
        return None
