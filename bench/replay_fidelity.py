"""Replay fidelity: the replayed application binary's median vs the in-app time.

Records each example (default options), replays every instance with the
application's own compiled kernel (baseline "original"), and prints, per
instance, the in-app duration the recorder measured, the replay median and
their ratio; the replay median with L2 flushed before each launch too. Both
sides time the kernel alone: replay holds its stream at a gate while the
timed launches are issued (device.LaunchGate), and the recorder queues a
spin kernel ahead of its start event.

    python bench/replay_fidelity.py .carry/examples
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from pathlib import Path

from mneme_cc.record.db import RecordDB
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.running.replayer import Replayer

# Sizes at which kernels run for tens of microseconds or more; the recorder's
# in-app figure is one launch, and shorter kernels vary by more than 5%.
SIZES = {"vector_add": [], "cg": ["128", "30"], "stencil3d": ["96"], "tree_search": [],
         "atomic_sum": ["16777216"], "big_shared": ["2048"], "multi_tu": ["16777216"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path)
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    ratios: list[float] = []
    flushed: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, app_args in SIZES.items():
            db_path = Path(scratch) / name
            print(f"recording {name} {' '.join(app_args)}", flush=True)
            subprocess.run(["mneme", "record", "-rdb", str(db_path), "--",
                            str(args.examples / name), *app_args], check=True,
                           capture_output=True)
            for inst in RecordDB(db_path).instances:
                with Replayer(inst, cache_dir=Path(scratch) / "cache") as r:
                    res = r.replay(ReplayConfig(baseline="original", iterations=args.iterations))
                    cold = r.replay(ReplayConfig(baseline="original", iterations=args.iterations,
                                                 flush_l2=True))
                ratio = res.median_ms / inst.in_app_ms
                ratios.append(ratio)
                flushed.append(cold.median_ms / inst.in_app_ms)
                print(f"{name:11s} {inst.demangled[:40]:40s} in-app {inst.in_app_ms:8.4f} ms"
                      f"  replay {res.median_ms:8.4f} ms  ratio {ratio:5.3f}  "
                      f"(L2 flushed {flushed[-1]:5.3f})  "
                      f"{'verified' if res.verified and cold.verified else 'FAILED'}", flush=True)
    within = sum(abs(r - 1) <= 0.05 for r in ratios)
    print(f"median ratio over {len(ratios)} instances: {statistics.median(ratios):.3f} "
          f"(L2 flushed {statistics.median(flushed):.3f}); within 5%: {within}/{len(ratios)}")


if __name__ == "__main__":
    main()
