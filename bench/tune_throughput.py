"""Tuning throughput: verified observations per second of `mneme tune`.

Records vector_add (16 Mi floats) and the CG solver, then tunes, with the
exhaustive sampler over a 200-configuration space (bench/tune_spaces.py):

  1. vector_add and spmv over Compile200 (200 distinct binaries) and
     vector_add over Geometry200 (one binary, 200 launch shapes), with as
     many compile processes as cores; each with an empty compile cache;
  2. the same Compile200 studies with 1, 4, ... compile processes (scaling);
  3. with --kernel-tuner, vector_add over Geometry200 side by side with
     Kernel Tuner (brute force, cupy backend, same source, same 200 launch
     shapes, same timed launches per configuration, output verified by both).

Observations per second are trials / wall seconds of the study, from the
first trial to the last (the executor's start-up and the baseline replay are
printed apart). Run on the GPU machine from the repository root:

    python bench/tune_throughput.py .carry/examples --workers 1,4,16 --kernel-tuner
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from mneme_cc.record.db import RecordDB
from mneme_cc.tune.tuner import Tuner, TuneSettings

SPACES = Path(__file__).with_name("tune_spaces.py")
ITERATIONS, WARMUP = 7, 1  # Kernel Tuner's default: 7 timed runs per configuration


def record(examples: Path, scratch: Path, name: str, args: list[str], kernel: str):
    db = scratch / f"db-{name}"
    subprocess.run(["mneme", "record", "-rdb", str(db), "--", str(examples / name), *args],
                   check=True, capture_output=True)
    return RecordDB(db).kernel(kernel).instances[0]


def tune(inst, space: str, workers: int, scratch: Path, label: str) -> dict:
    study = f"{label}-{space}-{workers}"
    settings = TuneSettings(space=f"{SPACES}:{space}", sampler="exhaustive", trials=200,
                            compile_workers=workers, iterations=ITERATIONS, warmup=WARMUP,
                            study_name=study, out_dir=scratch / study,
                            cache_dir=scratch / f"cache-{study}")
    start = time.perf_counter()
    summary = Tuner(inst, settings).run()
    setup = time.perf_counter() - start - summary["seconds"]
    v = summary["outcomes"].get("verified", 0)
    if v < summary["trials"]:
        errors = Counter(json.loads(line)["error"][:160] for line in
                         (scratch / study / "trials.jsonl").read_text().splitlines())
        print(f"    outcomes {summary['outcomes']}; baseline {summary['baseline']['outcome']} "
              f"{summary['baseline']['error'][:160]}; errors {errors.most_common(3)}")
    print(f"{label:11s} {space:11s} workers {workers:2d}: {summary['trials']} trials, "
          f"{v} verified, {summary['observations_per_second']:6.1f} observations/s "
          f"({summary['verified_per_second']:.1f} verified/s); start-up and baseline "
          f"{setup:.1f} s; best {summary['speedup'] or 0:.3f}x the baseline", flush=True)
    return summary


VECTOR_ADD = """
__global__ void vector_add(const float *a, const float *b, float *c, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x)
    c[i] = a[i] + b[i];
}
"""


def kernel_tuner_side(props) -> float:
    """Kernel Tuner's observations per second over the same 200 launch shapes."""
    import kernel_tuner
    from tune_spaces import BLOCKS, grid_choices

    n = 1 << 24
    a = (np.arange(n) % 1024).astype(np.float32)
    b = ((3 * np.arange(n)) % 512).astype(np.float32) * 0.5
    c = np.zeros_like(a)
    params = {"block_size_x": list(BLOCKS), "num_blocks": list(grid_choices(props))}
    start = time.perf_counter()
    results, _ = kernel_tuner.tune_kernel(
        "vector_add", VECTOR_ADD, lambda p: (p["num_blocks"],), [a, b, c, np.int32(n)], params,
        grid_div_x=[], answer=[None, None, a + b, None], lang="cupy",
        iterations=ITERATIONS, quiet=True, verbose=False)
    wall = time.perf_counter() - start
    rate = len(results) / wall
    print(f"kernel_tuner vector_add Geometry200: {len(results)} configurations in {wall:.1f} s, "
          f"{rate:6.1f} observations/s", flush=True)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path)
    parser.add_argument("--workers", default="1,4", help="compile processes for the scaling run")
    parser.add_argument("--kernel-tuner", action="store_true")
    args = parser.parse_args()
    import sys

    sys.path.insert(0, str(SPACES.parent))
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        vadd = record(args.examples, scratch, "vector_add", [], "vector_add")
        spmv = record(args.examples, scratch, "cg", ["128", "20"], "spmv")
        print(f"{cores} cores; vector_add grid {vadd.grid} block {vadd.block}; "
              f"spmv grid {spmv.grid} block {spmv.block}", flush=True)
        for inst, label in ((vadd, "vector_add"), (spmv, "spmv")):
            tune(inst, "Compile200", cores, scratch, label)
        ours = tune(vadd, "Geometry200", cores, scratch, "vector_add")
        for workers in (int(w) for w in args.workers.split(",")):
            for inst, label in ((vadd, "vector_add"), (spmv, "spmv")):
                tune(inst, "Compile200", workers, scratch, label)
        if args.kernel_tuner:
            from mneme_cc.tune.properties import DeviceProperties

            theirs = kernel_tuner_side(DeviceProperties.query(0))
            print(f"ratio mneme tune / Kernel Tuner (Geometry200, vector_add): "
                  f"{ours['observations_per_second'] / theirs:.2f}")


if __name__ == "__main__":
    main()
