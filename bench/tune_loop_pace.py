"""The tuning loop's own pace: trials per second with no GPU time at all.

A study of the `auto` space on the synthetic database (tests/synthetic_db.py)
runs against an instant executor whose kernel time depends on the
configuration, for `--seconds` each, alternating with and without asker
processes. What it measures is the loop itself (the sampler, local steps,
the storage, the bookkeeping): the ceiling a study of a very short kernel
meets, and whether it falls as the study grows (trials per second in the
first and the last third). Runs anywhere; no GPU is used.

`--emulated` alternates instead the instant executor with the real one
(its threads, pipes and worker processes) whose compile processes and GPU
workers only sleep a compile's and a replay's time
(tests/tune/tune_doubles.py), `--devices` of them: whether serving the
workers slows the loop. It prints the loop's own milliseconds a trial.

    python bench/tune_loop_pace.py --seconds 10 --repeats 3 --askers 2
    python bench/tune_loop_pace.py --emulated --devices 2 --askers 2
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "tune")]

from synthetic_db import make_database  # noqa: E402
from tune_doubles import H100, EmulatedExecutor, FakeExecutor  # noqa: E402

from mneme_cc.record.db import RecordDB  # noqa: E402
from mneme_cc.replay import outcome as oc  # noqa: E402
from mneme_cc.tune.executor import TrialResult  # noqa: E402
from mneme_cc.tune.settings import TuneSettings  # noqa: E402
from mneme_cc.tune.tuner import Tuner  # noqa: E402


class InstantExecutor(FakeExecutor):
    """Every configuration verifies at once, its time a fixed function of it."""

    def submit(self, config):
        spread = int(hashlib.sha256(config.key().encode()).hexdigest()[:4], 16) / 65536
        ms = 1.0 + 0.5 * spread - 0.1 * config.pipeline.endswith("3>")
        future = Future()
        future.set_result(TrialResult(oc.VERIFIED, config, median_ms=ms, samples_ms=[ms],
                                      registers=32))
        return future


def one_study(instance, out: Path, seconds: float, askers: int, devices: int | None = None,
              emulated: bool = False) -> dict:
    """One study; with `devices`, as many GPUs fed by one loop and 32 compile processes."""
    sized = {"devices": list(range(devices)), "compile_workers": 32,
             "loop_per_device": False} if devices else {}
    settings = TuneSettings(trials=10**7, timeout=seconds, sampler="tpe", seed=1, out_dir=out,
                            askers=askers, **sized)
    told: list[float] = []  # when each trial was told
    tuner = Tuner(instance, settings, props=H100,
                  executor=EmulatedExecutor if emulated else InstantExecutor,
                  on_trial=lambda _tuner, _result: told.append(time.perf_counter()))
    summary = tuner.run()
    spent = summary["time_spent"]
    third = seconds / 3

    def pace(since: float) -> float:  # trials per second over a third of the study
        return sum(since <= t < since + third for t in told) / third

    return {"trials": summary["trials"], "seconds": summary["seconds"],
            "distinct_verified": tuner.distinct[oc.VERIFIED], "best_ms": summary["best_median_ms"],
            "loop_ms": (spent["ask"] + spent["tell"]) / max(1, summary["trials"]) * 1e3,
            "first_third": pace(tuner.started), "last_third": pace(tuner.started + 2 * third)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--askers", type=int, default=2, help="the other side (default 2)")
    parser.add_argument("--emulated", action="store_true",
                        help="the instant executor against the real one with sleeping workers")
    parser.add_argument("--devices", type=int, default=2, help="GPUs emulated (default 2)")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mneme-loop-") as scratch:
        data = np.arange(1024, dtype=np.float32)
        make_database(Path(scratch) / "db", data, data, data + data)
        (instance,) = RecordDB(Path(scratch) / "db").instances
        if a.emulated:
            emulate(instance, Path(scratch), a)
            return
        runs: dict[int, list[dict]] = {0: [], a.askers: []}
        for repeat in range(a.repeats):
            for askers in runs:
                row = one_study(instance, Path(scratch) / f"s{askers}-{repeat}", a.seconds,
                                askers)
                runs[askers].append(row)
                print(f"askers {askers}: {row['trials']} trials in {row['seconds']:.1f} s "
                      f"({row['first_third']:.0f}/s in its first third, "
                      f"{row['last_third']:.0f}/s in its last), {row['distinct_verified']} "
                      f"distinct verified, best {row['best_ms']:.4f}", flush=True)
    for askers, rows in runs.items():
        print(f"askers {askers}: median {statistics.median(r['trials'] for r in rows):.0f} "
              f"trials, {statistics.median(r['distinct_verified'] for r in rows):.0f} distinct "
              f"verified in {a.seconds:g} s ({len(rows)} runs)")


def emulate(instance, scratch: Path, a) -> None:
    runs: dict[str, list[dict]] = {"instant": [], "emulated": []}
    for repeat in range(a.repeats):
        for side in runs:
            row = one_study(instance, scratch / f"{side}-{repeat}", a.seconds, a.askers,
                            a.devices, emulated=side == "emulated")
            runs[side].append(row)
            print(f"{side}: {row['trials'] / row['seconds']:.1f} trials/s, the loop "
                  f"{row['loop_ms']:.2f} ms a trial", flush=True)
    for side, rows in runs.items():
        print(f"{side}: median {statistics.median(r['trials'] / r['seconds'] for r in rows):.1f} "
              f"trials/s, the loop {statistics.median(r['loop_ms'] for r in rows):.2f} ms a "
              f"trial ({len(rows)} runs, {a.devices} GPU(s), {a.askers} askers)")


if __name__ == "__main__":
    main()
