"""Replay fidelity: the replayed application binary's median vs the in-app time.

Records each example (default options), replays every instance with the
application's own compiled kernel (baseline "original"), and prints, per
instance, the in-app duration the recorder measured, the replay median and
their ratio.

    python bench/replay_fidelity.py .carry/examples
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from pathlib import Path

from mneme_cc.recorddb import RecordDB
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.replay.replayer import Replayer

SIZES = {"vector_add": [], "cg": ["64", "50"], "stencil3d": [], "tree_search": [],
         "atomic_sum": [], "big_shared": [], "multi_tu": []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path)
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, app_args in SIZES.items():
            db_path = Path(scratch) / name
            subprocess.run(["mneme", "record", "-rdb", str(db_path), "--",
                            str(args.examples / name), *app_args], check=True,
                           capture_output=True)
            for inst in RecordDB(db_path).instances:
                with Replayer(inst, cache_dir=Path(scratch) / "cache") as r:
                    res = r.replay(ReplayConfig(baseline="original", iterations=args.iterations))
                ratio = res.median_ms / inst.in_app_ms
                ratios.append(ratio)
                print(f"{name:12s} {inst.entry['demangled'][:48]:48s} in-app {inst.in_app_ms:8.4f} ms  "
                      f"replay median {res.median_ms:8.4f} ms  ratio {ratio:5.2f}  "
                      f"{'verified' if res.verified else 'FAILED'}")
    print(f"median ratio over {len(ratios)} instances: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
