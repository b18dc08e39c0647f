"""The tuning loop's own pace: trials per second with no GPU time at all.

A study of the `auto` space on the synthetic database (tests/synthetic_db.py)
runs against an instant executor whose kernel time depends on the
configuration, for `--seconds` each, alternating with and without asker
processes. What it measures is the loop itself (the sampler, local steps,
the storage, the bookkeeping): the ceiling a study of a very short kernel
meets. Runs anywhere; no GPU is used.

    python bench/tune_loop_pace.py --seconds 10 --repeats 3 --askers 2
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
from concurrent.futures import Future
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "tune")]

from synthetic_db import make_database  # noqa: E402
from tune_doubles import H100, FakeExecutor  # noqa: E402

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


def one_study(instance, out: Path, seconds: float, askers: int) -> dict:
    settings = TuneSettings(trials=10**7, timeout=seconds, sampler="tpe", seed=1, out_dir=out,
                            askers=askers)
    tuner = Tuner(instance, settings, props=H100, executor=InstantExecutor)
    summary = tuner.run()
    return {"trials": summary["trials"], "seconds": summary["seconds"],
            "distinct_verified": tuner.distinct[oc.VERIFIED], "best_ms": summary["best_median_ms"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--askers", type=int, default=2, help="the other side (default 2)")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mneme-loop-") as scratch:
        data = np.arange(1024, dtype=np.float32)
        make_database(Path(scratch) / "db", data, data, data + data)
        (instance,) = RecordDB(Path(scratch) / "db").instances
        runs: dict[int, list[dict]] = {0: [], a.askers: []}
        for repeat in range(a.repeats):
            for askers in runs:
                row = one_study(instance, Path(scratch) / f"s{askers}-{repeat}", a.seconds,
                                askers)
                runs[askers].append(row)
                print(f"askers {askers}: {row['trials']} trials in {row['seconds']:.1f} s, "
                      f"{row['distinct_verified']} distinct verified, best {row['best_ms']:.4f}",
                      flush=True)
    for askers, rows in runs.items():
        print(f"askers {askers}: median {statistics.median(r['trials'] for r in rows):.0f} "
              f"trials, {statistics.median(r['distinct_verified'] for r in rows):.0f} distinct "
              f"verified in {a.seconds:g} s ({len(rows)} runs)")


if __name__ == "__main__":
    main()
