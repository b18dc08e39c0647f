"""Samplers by name, and the objectives a study minimises."""

from __future__ import annotations

from mneme_cc.errors import UsageError

#: Objective name -> the TrialResult attribute it minimises.
OBJECTIVES = {"time": "median_ms", "registers": "registers", "cubin_size": "cubin_bytes"}
SAMPLERS = ("tpe", "random", "exhaustive", "gp", "cmaes", "nsga2")


def parse_objectives(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in OBJECTIVES]
    if not names or unknown:
        raise UsageError(f"unknown objective(s) {', '.join(unknown) or '(none)'}: use one or "
                         f"more of {', '.join(OBJECTIVES)}, comma-separated")
    return names


def make_sampler(name: str, objectives: int = 1, seed: int | None = None):
    """An Optuna sampler. Several objectives need one that keeps a Pareto
    front (tpe, random, exhaustive, nsga2)."""
    import optuna

    samplers = optuna.samplers
    if name not in SAMPLERS:
        raise UsageError(f"unknown sampler '{name}': use one of {', '.join(SAMPLERS)}")
    if objectives > 1 and name in ("gp", "cmaes"):
        raise UsageError(f"the {name} sampler takes one objective; use nsga2 or tpe for "
                         "several")
    try:
        if name == "tpe":
            # constant_liar keeps parallel trials from piling onto one point.
            from mneme_cc.tune.tpe_window import WindowedTPESampler

            return WindowedTPESampler(seed=seed, multivariate=True, group=True,
                                      constant_liar=True)
        if name == "random":
            return samplers.RandomSampler(seed=seed)
        if name == "exhaustive":
            # The tuner enqueues every combination (space.combinations()).
            return samplers.RandomSampler(seed=seed)
        if name == "gp":
            import scipy  # noqa: F401 - GPSampler needs it (and torch) only when sampling
            import torch  # noqa: F401
            return samplers.GPSampler(seed=seed)
        if name == "cmaes":
            import cmaes  # noqa: F401
            return samplers.CmaEsSampler(seed=seed)
        return samplers.NSGAIISampler(seed=seed)
    except ImportError as exc:
        raise UsageError(f"the {name} sampler needs {exc.name}: pip install {exc.name}") \
            from None
