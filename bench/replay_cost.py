"""Replay cost: where one configuration's time goes, and verified observations per second.

Records vector_add and the CG solver, then replays vector_add and spmv under
a sweep of distinct configurations (pipelines x argument specialisation x
register caps), first with an empty compile cache, then again with it warm.
Prints the mean seconds per stage (parse, transform, optimize, codegen,
ptxas, load, restore, launch, verify, time) and the verified configurations
per second of wall time, single process.

    python bench/replay_cost.py .carry/examples
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from mneme_cc.record.db import RecordDB
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running.replayer import Replayer

STAGES = ("parse", "transform", "optimize", "codegen", "ptxas", "load", "restore", "launch",
          "verify", "time")


def sweep(inst) -> list[ReplayConfig]:
    scalars = tuple(i for i, p in enumerate(inst.params) if p["size"] == 4)
    return [ReplayConfig(pipeline=f"default<O{level}>", specialize_args=spec,
                         max_registers=regs, iterations=10, warmup=2)
            for level in range(4) for spec in ((), scalars) for regs in (None, 32, 64)]


def run(inst, cache: Path, label: str) -> None:
    configs = sweep(inst)
    per_stage: dict[str, list[float]] = {s: [] for s in STAGES}
    start = time.perf_counter()
    verified = 0
    with Replayer(inst, cache_dir=cache) as replayer:
        opened = time.perf_counter() - start
        for config in configs:
            result = replayer.replay(config)
            verified += result.verified
            for stage in STAGES:
                per_stage[stage].append(result.compile_seconds.get(stage,
                                        result.replay_seconds.get(stage, 0.0)))
    wall = time.perf_counter() - start
    # The first replay also builds the compare kernel and copies the expected
    # epilogue to the device, once per Replayer: shown apart.
    means = "  ".join(f"{s} {statistics.fmean(v[1:]) * 1e3:.2f}" for s, v in per_stage.items())
    first = sum(v[0] for v in per_stage.values()) - sum(statistics.fmean(v[1:])
                                                         for v in per_stage.values())
    print(f"{label:28s} {verified}/{len(configs)} verified, {len(configs) / wall:6.1f} "
          f"observations/s (setup {opened:.2f} s, first replay {first * 1e3:.0f} ms more)\n"
          f"    ms per config after the first: {means}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        picks = []
        for name, app_args, kernel in (("vector_add", [], "vector_add"),
                                       ("cg", ["64", "20"], "spmv")):
            db = Path(scratch) / name
            subprocess.run(["mneme", "record", "-rdb", str(db), "--",
                            str(args.examples / name), *app_args], check=True, capture_output=True)
            picks.append(RecordDB(db).kernel(kernel).instances[0])
        for inst in picks:
            cache = Path(scratch) / f"cache-{inst.static_hash}"
            run(inst, cache, f"{inst.demangled.split('(')[0]} (cache cold)")
            run(inst, cache, f"{inst.demangled.split('(')[0]} (cache warm)")


if __name__ == "__main__":
    main()
