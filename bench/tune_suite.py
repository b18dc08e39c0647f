"""The tuning suite (examples/SUITE.md): what `mneme tune` wins on each
realistic kernel within a fixed budget.

For every suite application: record its main kernel (one instance), tune it
with `--timeout BUDGET` on one GPU, and report the speedup of the best
verified configuration over the application's own kernel, the verdict,
verified observations per second and the GPU floor on them (what the
trials' own launches allow at the kernel's time), outcome counts, the
share of ptxas and launch refusals, how far the study ran past its budget,
and where the time went. Run on the GPU machine from the repository root, after
scripts/build-gpu-carry:

    python bench/tune_suite.py .carry/examples --budget 60 --space standard
    python bench/tune_suite.py .carry/examples --only nbody,cg --space auto

With `--warm-start`, each main kernel is recorded twice (two instances):
the first instance is tuned, then the second with warm start (from the
first's study) and without, and the rows say how many trials each took to
come within 2% of its own best (`trials_to_near_best`) and what each found.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import tempfile
import time
from pathlib import Path

#: name, arguments, the main kernel (a regex the recorder matches).
SUITE = [
    ("nbody", [], "body_forces"),
    ("microphysics", [], "microphysics"),
    ("xs_lookup", [], "xs_lookup"),
    ("floyd_warshall", [], "fw_remaining"),
    ("particle_filter", [], "predict_weigh"),
    ("histogram", [], "block_histograms"),
    ("cg", [], "spmv"),
    ("stencil3d", ["512"], "stencil3d"),
    ("wave3d", ["256", "8"], "wave_step"),
]
REFUSALS = ("compile_error", "invalid_launch")


def _record(examples: Path, db: Path, name: str, args: list[str], kernel: str,
            instances: int) -> None:
    subprocess.run(["mneme", "record", "-rdb", str(db), "--kernels", kernel, "--max-instances",
                    str(instances), "--", str(examples / name), *args],
                   check=True, capture_output=True)


#: Flags every study of the run gets (--askers, --devices, --no-race, --warmup).
EXTRA: list[str] = []


def where_time_went(spent: dict[str, float], loops: int = 1) -> str:
    """A study's seconds by stage: what came before its first trial (the
    workers' start, the baselines, calibrating replays), the loop's asks and
    tells, then what its trials spent compiling (summed over compile
    processes), queued for a GPU and on the GPU (summed over GPUs). With a
    loop per GPU every stage but the wall is summed over the loops, which
    ran side by side."""
    def total(prefix: str) -> float:
        return sum(v for k, v in spent.items() if k.startswith(prefix))
    first = sum(spent.get(k, 0) for k in ("startup", "baselines", "calibrate"))
    summed = f"; the rest summed over {loops} loops" if loops > 1 else ""
    return (f"wall {spent.get('wall', 0):.1f} s{summed}: before the first trial {first:.1f} "
            f"(start {spent.get('startup', 0):.1f}: GPU workers ready after "
            f"{spent.get('startup.gpu', 0):.1f}, compile processes after "
            f"{spent.get('startup.compile', 0):.1f}), ask {spent.get('ask', 0):.1f} ("
            + ", ".join(f"{k[4:]} {v:.1f}" for k, v in spent.items() if k.startswith("ask."))
            + f"), tell {spent.get('tell', 0):.1f}, the loop on a processor "
            f"{spent.get('loop.cpu', 0):.1f}, results written "
            f"{spent.get('result.write', 0):.1f}, "
            f"report {spent.get('report', 0):.1f}, compile {total('compile.'):.1f}, "
            f"queue {spent.get('queue', 0):.1f}, gpu {total('gpu.'):.1f}")


def gpu_floor(summary: dict) -> float | None:
    """Verified trials per second a GPU doing nothing but the trials' own
    launches would allow: one verified launch, the warm-up and the timed
    launches each, at the application's kernel time (racing can pass it)."""
    launches = summary.get("timed_launches") or {}
    kernel_ms = (summary.get("baseline") or {}).get("median_ms")
    if not kernel_ms or "iterations" not in launches:
        return None
    return 1000.0 / ((1 + launches.get("warmup", 0) + launches["iterations"]) * kernel_ms)


def _tune(db: Path, budget: float, space: str, *flags: str):
    """`mneme tune`'s JSON summary (a list for several instances); RuntimeError
    with its last line of stderr when it printed none."""
    out = subprocess.run(["mneme", "tune", "-rdb", str(db), "--space", space, "--trials",
                          "100000", "--timeout", str(budget), "--json", *EXTRA, *flags],
                         capture_output=True, text=True)
    if not out.stdout.strip():
        raise RuntimeError(out.stderr.strip().splitlines()[-1:])
    return json.loads(out.stdout)


def study(examples: Path, scratch: Path, name: str, args: list[str], kernel: str,
          budget: float, space: str) -> dict:
    db = scratch / f"db-{name}"
    _record(examples, db, name, args, kernel, 1)
    started = time.perf_counter()
    try:
        s = _tune(db, budget, space)
    except RuntimeError as exc:
        return {"app": name, "error": str(exc)}
    wall = time.perf_counter() - started
    if isinstance(s, list):  # the regex matched several kernels: the slowest is the main one
        s = max(s, key=lambda x: (x["baseline"] or {}).get("median_ms") or 0.0)
    loops = len(s.get("devices") or [None])
    ran = sum(v for k, v in s["outcomes"].items() if k not in ("numerics_changing",
                                                               "infeasible"))
    return {"app": name, "kernel": s["kernel"], "speedup": s["speedup"],
            "measured_speedup": s["measured_speedup"], "verdict": s["verdict"],
            "verified_per_s": s["verified_per_second"], "trials": s["trials"],
            "distinct_verified_per_s": s["distinct_verified_per_second"],
            "outcomes": s["outcomes"],
            "refusals": sum(s["outcomes"].get(k, 0) for k in REFUSALS) / ran if ran else 0.0,
            "over_budget_s": s["time_spent"]["wall"] - budget, "cli_wall_s": wall,
            "baseline_ms": (s["baseline"] or {}).get("median_ms"),
            "best_ms": s["best_median_ms"], "time_spent": s["time_spent"],
            "where": where_time_went(s["time_spent"], loops),
            "askers": s.get("askers"),
            "raced": s.get("raced"), "settled": s.get("settled"),
            "worker_restarts": s.get("worker_restarts"),
            "learned_numerics": s.get("learned_numerics"),
            "gpu_floor_per_s": gpu_floor(s), "loops": loops}


def warm_start_check(examples: Path, scratch: Path, name: str, args: list[str], kernel: str,
                     budget: float, space: str) -> dict:
    """Trials to within 2% of the best for a second instance, with and without warm start."""
    from mneme_cc.record import RecordDB

    db = scratch / f"warm-{name}"
    _record(examples, db, name, args, kernel, 2)
    by_kernel: dict[str, list] = {}
    for inst in RecordDB(db).instances:
        by_kernel.setdefault(inst.kernel_name, []).append(inst)
    pairs = [v for v in by_kernel.values() if len(v) >= 2]
    if not pairs:
        return {"app": name, "error": "fewer than two instances of the main kernel"}
    first, second = max(pairs, key=lambda v: v[0].in_app_ms or 0.0)[:2]
    try:
        _tune(db, budget, space, "-rid", first.name, "--study", "first", "--no-warm-start")
        warm = _tune(db, budget, space, "-rid", second.name, "--study", "warm")
        cold = _tune(db, budget, space, "-rid", second.name, "--study", "cold",
                     "--no-warm-start")
    except RuntimeError as exc:
        return {"app": name, "error": str(exc)}
    return {"app": name, "kernel": warm["kernel"], "seeds": len(warm["warm_start"]),
            "warm_trials_to_near_best": warm["trials_to_near_best"],
            "cold_trials_to_near_best": cold["trials_to_near_best"],
            "warm_speedup": warm["speedup"], "cold_speedup": cold["speedup"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path)
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--space", default="standard")
    parser.add_argument("--only", help="comma list of suite applications")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--askers", type=int, help="asker processes per study (mneme tune's "
                        "default when not given)")
    parser.add_argument("--devices", help="GPU ordinals for every study, e.g. 0,1")
    parser.add_argument("--no-race", action="store_true",
                        help="time every trial in full (mneme tune --no-race)")
    parser.add_argument("--warmup", type=int, help="untimed launches before each trial's timed "
                        "ones (mneme tune --warmup; its default when not given)")
    parser.add_argument("--warm-start", action="store_true",
                        help="measure what warm start saves instead (two instances each)")
    a = parser.parse_args()
    EXTRA.extend([*(["--askers", str(a.askers)] if a.askers is not None else []),
                  *(["--devices", a.devices] if a.devices else []),
                  *(["--no-race"] if a.no_race else []),
                  *(["--warmup", str(a.warmup)] if a.warmup is not None else [])])
    wanted = set(a.only.split(",")) if a.only else None
    rows = []
    measure = warm_start_check if a.warm_start else study
    with tempfile.TemporaryDirectory(prefix="mneme-suite-") as scratch:
        for name, args, kernel in SUITE:
            if wanted is None or name in wanted:
                rows.append(measure(a.examples, Path(scratch), name, args, kernel, a.budget,
                                    a.space))
                print(json.dumps(rows[-1]), flush=True)
    if a.warm_start:
        done = [r for r in rows if r.get("warm_trials_to_near_best")]
        if done:
            saved = sorted(r["cold_trials_to_near_best"] - r["warm_trials_to_near_best"]
                           for r in done)
            print(f"warm start, budget {a.budget:g} s: trials to within 2% of the best saved, "
                  f"median {saved[len(saved) // 2]} over {len(done)} kernels ({saved})")
        if a.json:
            a.json.write_text(json.dumps(rows, indent=2))
        return
    good = [r for r in rows if r.get("speedup")]
    if good:
        geomean = math.exp(sum(math.log(r["speedup"]) for r in good) / len(good))
        rates = sorted(r["verified_per_s"] for r in good)
        distinct = sorted(r["distinct_verified_per_s"] for r in good)
        print(f"space {a.space}, budget {a.budget:g} s: geomean speedup {geomean:.3f} over "
              f"{len(good)} kernels; median verified/s {rates[len(rates) // 2]:.1f} "
              f"({distinct[len(distinct) // 2]:.1f} distinct configurations); "
              f"most over budget {max(r['over_budget_s'] for r in good):.1f} s; "
              f"refusals {sum(r['refusals'] for r in good) / len(good):.1%}")
        # With a loop per GPU, ask and tell are summed over the loops.
        loop = sorted((r["time_spent"].get("ask", 0) + r["time_spent"].get("tell", 0))
                      / (r["time_spent"]["wall"] * r.get("loops", 1)) for r in good)
        print(f"the tuning loops (ask + tell) / wall: median {loop[len(loop) // 2]:.0%} "
              f"({loop[0]:.0%}-{loop[-1]:.0%})")
        floors = sorted(r["gpu_floor_per_s"] for r in good if r.get("gpu_floor_per_s"))
        shares = sorted(r["verified_per_s"] / r["gpu_floor_per_s"] for r in good
                        if r.get("gpu_floor_per_s"))
        if floors:
            print(f"GPU floor (the trials' own launches): median {floors[len(floors) // 2]:.1f} "
                  f"verified/s; pace / floor: median {shares[len(shares) // 2]:.2f} "
                  f"({shares[0]:.2f}-{shares[-1]:.2f})")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
