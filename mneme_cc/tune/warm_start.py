"""Warm start: a new study first tries what won in related studies of the
same record database, then its sampler takes over.

Related, in this order: the other instances of the same kernel, then
kernels whose IR looks alike (the instruction mix of the kernel and the
functions it calls, libdevice left out: cosine similarity at least
`SIMILAR`). From each, the best verified trials (by speedup over that
study's own baseline), their parameters kept where this study's space has
the parameter and allows the value: a parameter the space lacks is dropped,
one the source lacks is left to the sampler. At most `LIMIT` are enqueued,
after the application's own settings. What the same kernel's studies ran
also tells a bitwise study which parameter values change the numerics
(`lessons`, mneme_cc.tune.bitwise.LearnedNumerics).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mneme_cc.errors import MnemeError
from mneme_cc.replay import outcome as oc
from mneme_cc.replay.compiling import irtext
from mneme_cc.tune.space import Categorical, Int, Real, SearchSpace, exists
from mneme_cc.tune.study_dir import SUMMARY, StudyDir

LIMIT = 8          # configurations enqueued at most
NEAR_BEST = 1.02   # within 2% of a study's best: what trials_to_near_best counts to
PER_STUDY = 3      # best trials taken from one source study
SIMILAR = 0.95     # cosine similarity of the instruction mixes

#: Instruction classes of the mix: (name, what a line of IR starts its operation with).
_CLASSES = {
    "float": r"= (?:fadd|fsub|fmul|fdiv|frem|fneg)\b",
    "fused": r"= (?:tail )?call [^@]*@llvm\.(?:fma|fmuladd)\.",
    "math": r"= (?:tail )?call [^@]*@__nv_",
    "int": r"= (?:add|sub|mul|udiv|sdiv|urem|srem|shl|lshr|ashr|and|or|xor)\b",
    "compare": r"= (?:icmp|fcmp)\b",
    "convert": r"= (?:sitofp|uitofp|fptosi|fptoui|fpext|fptrunc|zext|sext|trunc)\b",
    "load": r"= load\b",
    "store": r"^\s*store\b",
    "shared": r"addrspace\(3\)",
    "atomic": r"\b(?:atomicrmw|cmpxchg)\b",
    "branch": r"^\s*(?:br|switch)\b",
    "select": r"= select\b",
}
_CALLEE = re.compile(r"call [^@\n]*@([\w.$]+)\(")


@dataclass(frozen=True)
class Seed:
    params: dict[str, Any]
    study: str          # where it won
    why: str            # "the same kernel", or "similar IR (0.97)"
    speedup: float      # over that study's baseline


def instruction_mix(ir_text: str, kernel: str) -> Counter[str]:
    """The kernel's instruction classes, with the functions it calls (libdevice's
    and LLVM's own left out: they are the same for every kernel that calls them)."""
    mix: Counter[str] = Counter()
    seen, todo = set(), [kernel]
    while todo:
        name = todo.pop()
        body = irtext.function_text(ir_text, name)
        if name in seen or body is None:
            continue
        seen.add(name)
        for line in body.splitlines():
            for cls, pattern in _CLASSES.items():
                if re.search(pattern, line):
                    mix[cls] += 1
        todo += [c for c in _CALLEE.findall(body) if not c.startswith(("__nv_", "llvm."))]
    return mix


def similarity(a: Counter[str], b: Counter[str]) -> float:
    """Cosine similarity of two instruction mixes (0 when either is empty)."""
    dot = sum(a[k] * b[k] for k in a)
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return dot / norm if norm else 0.0


def fitted(space: SearchSpace, params: dict[str, Any]) -> dict[str, Any]:
    """params as far as this space takes them: in dimension order, each value
    kept where its dimension exists (its `when` holds) and allows it."""
    kept: dict[str, Any] = {}
    for dim in space.dimensions():
        if dim.name not in params or not exists(dim, kept):
            continue
        value = params[dim.name]
        if isinstance(dim, Categorical):
            fits = value in dim.choices and type(value) in {type(c) for c in dim.choices}
        elif isinstance(dim, Int):
            fits = type(value) is int and dim.low <= value <= dim.high and \
                (value - dim.low) % dim.step == 0
        elif isinstance(dim, Real):
            fits = isinstance(value, int | float) and not isinstance(value, bool) and \
                dim.low <= value <= dim.high
        else:
            fits = False
        if fits:
            kept[dim.name] = value
    return kept


def enqueue(study, name: str, instance, space: SearchSpace) -> None:
    """Enqueues a new study's seeds (Optuna's `study`, named `name`), once
    whichever process gets there first, and keeps what they are in the study
    (`seeded`) for every process's summary."""
    if "warm_start" in study.user_attrs:
        return
    chosen = seeds(instance.db.path, name, instance, space)
    study.set_user_attr("warm_start", [
        {"study": s.study, "why": s.why, "speedup": round(s.speedup, 4), "params": s.params}
        for s in chosen])
    for seed in chosen:
        study.enqueue_trial(seed.params, user_attrs={"warm_start": seed.study},
                            skip_if_exists=True)


def seeded(study) -> list[dict[str, Any]]:
    """What warm start enqueued in a study (empty: nothing, or it was off)."""
    found = study.user_attrs.get("warm_start")
    return found if isinstance(found, list) else []


def near_best_after(passed: list[tuple[int, float]]) -> int | None:
    """Trials asked for (by trial number, from 0) until the first of the
    passed (number, value) pairs within NEAR_BEST of the best value."""
    if not passed:
        return None
    best = min(value for _, value in passed)
    return 1 + min(number for number, value in passed if value <= best * NEAR_BEST)


def trials_to_near_best(study) -> int | None:
    """near_best_after over a single-objective study's finished trials, from
    every process and run; None for several objectives."""
    if len(study.directions) > 1:
        return None
    import optuna

    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    return near_best_after([(t.number, t.values[0]) for t in done if t.values])


#: The most of one source study's files read (a damaged or hostile database).
_MOST_BYTES = 64 << 20


def _readable(path: Path) -> bool:
    return path.is_file() and path.stat().st_size <= _MOST_BYTES


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        math.isfinite(value) and value > 0


def _best_trials(study: StudyDir) -> list[tuple[float, dict[str, Any]]]:
    """(speedup over the study's baseline, params) of its best verified trials."""
    baseline = study.summary.get("baseline")
    baseline = baseline.get("median_ms") if isinstance(baseline, dict) else None
    if not _positive(baseline) or not _readable(study.path / "trials.jsonl"):
        return []
    ranked = sorted(((t["median_ms"], t["trial"], t["params"]) for t in study.trials
                     if t["outcome"] in oc.PASSED and not t.get("duplicate")
                     and _positive(t.get("median_ms"))), key=lambda r: r[:2])
    return [(baseline / ms, params) for ms, _, params in ranked[:PER_STUDY]]


def _other_studies(database: Path, this_study: str, instance):
    """(study, its instance) of the database's other studies whose instance
    is still recorded; one that cannot be read (damaged, not a study) is
    passed over."""
    for summary in sorted((database / "tune").glob(f"*/{SUMMARY}")):
        study = StudyDir(summary.parent)
        try:
            if not _readable(summary):
                continue
            name, other = study.summary.get("study"), study.summary.get("instance")
            if name == this_study or not isinstance(other, str) or not other:
                continue
            yield study, instance.db.find(rid=other)
        except (MnemeError, OSError, ValueError, TypeError, AttributeError):
            continue  # a damaged summary, or an instance no longer recorded


def lessons(database: Path, this_study: str, instance) -> list[tuple[dict[str, Any],
                                                                     dict[str, Any]]]:
    """(parameters, {"outcome", "config"}) of each configuration the other
    studies of the same kernel ran, for LearnedNumerics.told_earlier."""
    ran = []
    for study, source in _other_studies(database, this_study, instance):
        if source.kernel_name != instance.kernel_name or \
                not _readable(study.path / "trials.jsonl"):
            continue
        try:
            ran += [(t["params"], {"outcome": t["outcome"], "config": t.get("config")})
                    for t in study.trials if isinstance(t.get("params"), dict)
                    and isinstance(t.get("outcome"), str) and not t.get("duplicate")]
        except (MnemeError, OSError, ValueError, TypeError, AttributeError, KeyError):
            continue
    return ran


def seeds(database: Path, this_study: str, instance, space: SearchSpace,
          limit: int = LIMIT) -> list[Seed]:
    """What to try first in a new study of `instance`, best sources first. A
    source study that cannot be read (damaged, not a study) is passed over."""
    sources: list[tuple[int, float, StudyDir, str]] = []  # (rank, -similarity, study, why)
    mine = _mix(instance.db, instance.static_hash, instance.kernel_name)
    for study, source in _other_studies(database, this_study, instance):
        if source.kernel_name == instance.kernel_name:
            sources.append((0, -1.0, study, "the same kernel"))
            continue
        try:
            score = similarity(mine, _mix(instance.db, source.static_hash, source.kernel_name))
        except (MnemeError, OSError, ValueError, TypeError, AttributeError):
            continue
        if score >= SIMILAR:
            sources.append((1, -score, study, f"similar IR ({score:.2f})"))
    out: list[Seed] = []
    taken: list[dict[str, Any]] = []
    for _, _, study, why in sorted(sources, key=lambda s: s[:2]):
        try:
            best = _best_trials(study)
        except (MnemeError, OSError, ValueError, TypeError, AttributeError):
            continue
        for speedup, params in best:
            kept = fitted(space, params)
            if kept and kept not in taken:
                taken.append(kept)
                out.append(Seed(kept, str(study.summary.get("study")), why, speedup))
    return sorted(out, key=lambda s: (s.why != "the same kernel", -s.speedup))[:limit]


@functools.lru_cache(maxsize=256)
def _mix(db, static_hash: str, kernel_name: str) -> Counter[str]:
    """A recorded kernel's instruction mix (empty without IR), read once per database."""
    kernel = db.kernel(static_hash)
    if not kernel.has_ir:
        return Counter()
    try:
        return instruction_mix(str(kernel.module), kernel_name)
    except (MnemeError, RuntimeError):
        return Counter()
