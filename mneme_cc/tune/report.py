"""Plots of a finished (or running) study, as PNG files and one HTML page.

    history.png       each verified trial's objective, and the best so far
    importance.png    which parameters set the best trials apart (PED-ANOVA, chosen explicitly)
    pareto.png        the first two objectives of every verified trial, the
                      Pareto front marked (studies with several objectives)
    distribution.png  the timed samples of the best configuration and of the
                      baseline, side by side
    report.html       the figures, the outcomes and the ten best trials

Everything comes from the study directory (summary.json, best.json,
trials.jsonl) and the study's Optuna storage, which optuna-dashboard also
reads: `optuna-dashboard <storage>`.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from mneme_cc.errors import UsageError
from mneme_cc.fileio import write_text_atomic
from mneme_cc.tune.study_dir import StudyDir


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("mneme report draws with matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")  # files only, never a window
    matplotlib.rcParams["axes.titlesize"] = 9
    import matplotlib.pyplot as plt

    return plt


def _history(plt, study: StudyDir, out: Path) -> Path | None:
    points = [(t["trial"], t.get("values")[0]) for t in study.trials if t.get("values")]
    if not points:
        return None
    points.sort()
    best, running = [], float("inf")
    for _, value in points:
        running = min(running, value)
        best.append(running)
    objective = study.summary["objectives"][0]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.scatter([p[0] for p in points], [p[1] for p in points], s=10, label="verified trial")
    ax.step([p[0] for p in points], best, where="post", color="C3", label="best so far")
    baseline = study.summary.get("baseline") or {}
    if objective == "time" and baseline.get("median_ms"):
        ax.axhline(baseline["median_ms"], color="grey", linestyle="--", label="baseline")
    ax.set(xlabel="trial", ylabel="median ms" if objective == "time" else objective,
           title=f"{study.summary['study']}: optimisation history")
    ax.legend()
    return _save(fig, plt, out / "history.png")


def importance_evaluator():
    """(name, what it measures, evaluator): chosen here, not left to Optuna's
    default (which changed in Optuna 5), so that the plot says which method
    it shows. PED-ANOVA needs nothing beyond Optuna (fANOVA needs
    scikit-learn) and asks the tuner's question: which parameters set the
    best trials apart from the rest."""
    import optuna

    return ("PED-ANOVA", "how much each parameter sets the best 10% of trials apart",
            optuna.importance.PedAnovaImportanceEvaluator())


def _importance(plt, study: StudyDir, out: Path) -> Path | None:
    import optuna

    optuna_study = study.study()
    complete = optuna_study.get_trials(deepcopy=False,
                                       states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 2 or not any(t.params for t in complete):
        return None
    target = (lambda t: t.values[0]) if len(optuna_study.directions) > 1 else None
    method, measures, evaluator = importance_evaluator()
    try:
        importances = optuna.importance.get_param_importances(optuna_study, target=target,
                                                              evaluator=evaluator)
    except (RuntimeError, ValueError):  # every trial alike: nothing to apportion
        return None
    if not importances:
        return None
    names = list(importances)[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(names) + 1.5))
    ax.barh(names, [importances[n] for n in names])
    ax.set(xlabel=f"importance ({method}: {measures})",
           title=f"{study.summary['study']}: parameter importance")
    return _save(fig, plt, out / "importance.png")


def _pareto(plt, study: StudyDir, out: Path) -> Path | None:
    objectives = study.summary["objectives"]
    points = [t.get("values")[:2] for t in study.trials if t.get("values")]
    if len(objectives) < 2 or not points:
        return None
    front = [p for p in points if not any(q[0] <= p[0] and q[1] <= p[1] and q != p
                                          for q in points)]
    front.sort()
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter([p[0] for p in points], [p[1] for p in points], s=10, label="verified trial")
    ax.plot([p[0] for p in front], [p[1] for p in front], "o-", color="C3", label="Pareto front")
    ax.set(xlabel=objectives[0], ylabel=objectives[1],
           title=f"{study.summary['study']}: Pareto front")
    ax.legend()
    return _save(fig, plt, out / "pareto.png")


def _distribution(plt, study: StudyDir, out: Path) -> Path | None:
    baseline = (study.summary.get("baseline") or {}).get("samples_ms")
    best = (study.best or {}).get("samples_ms")
    if not baseline or not best:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.boxplot([baseline, best], showfliers=True)
    ax.set_xticks([1, 2], ["baseline", "best"])
    ax.set(ylabel="ms per launch",
           title=f"{study.summary['study']}: {len(baseline)} and {len(best)} timed launches")
    return _save(fig, plt, out / "distribution.png")


def _save(fig, plt, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _html(study: StudyDir, figures: list[Path]) -> str:
    s = study.summary
    esc = html.escape
    outcomes = "".join(f"<tr><td>{esc(k)}</td><td>{v}</td></tr>"
                       for k, v in sorted(s["outcomes"].items()))
    ranked = sorted((t for t in study.trials if t.get("values")), key=lambda t: t.get("values"))[:10]
    rows = "".join(
        f"<tr><td>{t['trial']}</td><td>{t['values'][0]:.6g}</td>"
        f"<td><code>{esc(json.dumps(t['params'], sort_keys=True))}</code></td></tr>"
        for t in ranked)
    images = "".join(
        f'<figure><img alt="{p.stem}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode()}"></figure>' for p in figures)
    speedup = f"{s['speedup']:.3f}x" if s.get("speedup") else "none verified"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{esc(s['study'])}</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 10px;text-align:left}}
img{{max-width:100%}}</style></head><body>
<h1>{esc(s['study'])}</h1>
<p>kernel <code>{esc(s['kernel'])}</code>, instance {esc(s['instance'])}, space
{esc(s['space'])}, sampler {esc(s['sampler'])}, on {esc(s['device']['name'])}.
{s['trials']} trials in {s['seconds']:.1f} s ({s['observations_per_second']:.1f}/s);
best over baseline: {speedup}.</p>
<h2>Outcomes</h2><table>{outcomes}</table>
{images}
<h2>Best trials</h2><table><tr><th>trial</th><th>{esc(s['objectives'][0])}</th>
<th>parameters</th></tr>{rows}</table>
</body></html>
"""


def render(study: StudyDir, out: Path | None = None) -> list[Path]:
    """Writes the figures and report.html; returns the paths written."""
    plt = _pyplot()
    out = out or study.path / "report"
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: not a directory: name a directory for the report (--out)")
    try:
        _ = study.summary["study"], study.summary["objectives"][0]
        out.mkdir(parents=True, exist_ok=True)
        figures = [p for p in (_history(plt, study, out), _importance(plt, study, out),
                               _pareto(plt, study, out), _distribution(plt, study, out)) if p]
        page = out / "report.html"
        write_text_atomic(page, _html(study, figures))
    except KeyError as exc:  # a field the summary of this version always has
        raise UsageError(f"{study.path / 'summary.json'}: no {exc} (the summary is damaged "
                         "or from another version); run the study again") from None
    return [*figures, page]
