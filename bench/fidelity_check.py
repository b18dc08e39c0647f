"""The fidelity audit over every example: `mneme check` on each recording.

Records each example application and each build of the floating-point flag
matrix (tests/conftest.py: FLAG_MATRIX), runs `mneme check --json` on the
database, and prints one line per instance (original, ir and pinned
outcomes, ir/original and pinned/ir median-time ratios) and the totals the
README quotes. Pinned is the IR at the recorded settings with its leftover
multiply-adds written `.rn` for ptxas: the ratio shows what pinning costs.

    python bench/fidelity_check.py .carry/examples
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import FLAG_MATRIX, MATRIX_EXAMPLES  # noqa: E402

ARGS = {"vector_add": [], "cg": ["64", "20"], "stencil3d": ["64"], "tree_search": [],
        "atomic_sum": ["4194304"], "big_shared": ["512"], "multi_tu": ["1000000"],
        "fp_physics": [], "jacobi_norm": []}


def check(binary: Path, args: list[str], scratch: Path, iterations: int) -> dict:
    db = scratch / f"{binary.name}.db"
    subprocess.run(["mneme", "record", "-rdb", str(db), "--", str(binary), *args], check=True,
                   capture_output=True)
    proc = subprocess.run(["mneme", "check", "-rdb", str(db), "--json", "--iterations",
                           str(iterations)], capture_output=True, text=True,
                          env={**os.environ, "MNEME_CACHE_DIR": str(scratch / "cache")})
    if proc.returncode not in (0, 1):
        raise SystemExit(f"mneme check on {binary.name}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path)
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    binaries = [(args.examples / name, a) for name, a in ARGS.items()]
    binaries += [(args.examples / "matrix" / f"{example}.{cell}", ARGS[example])
                 for example in MATRIX_EXAMPLES for cell in FLAG_MATRIX]
    totals = {"instances": 0, "bitwise": 0, "nondeterministic": 0, "failed": 0,
              "pinned_differs": 0}
    ir_ratio, pinned_ratio = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for binary, app_args in binaries:
            report = check(binary, app_args, Path(scratch), args.iterations)
            for key in ("instances", "bitwise", "nondeterministic", "failed"):
                totals[key] += report["totals"][key]
            for row in report["instances"]:
                b = row["baselines"]
                outcomes = " ".join(f"{k}={v['outcome']}" for k, v in b.items())
                totals["pinned_differs"] += b.get("pinned", {}).get("outcome") == \
                    "failed_verification"
                if row["ir_over_original"]:
                    ir_ratio.append(row["ir_over_original"])
                if row["pinned_over_ir"]:
                    pinned_ratio.append(row["pinned_over_ir"])
                print(f"{binary.name:28} {row['kernel'][:40]:40} {outcomes}  "
                      f"ir/original {row['ir_over_original'] or 0:.3f}  "
                      f"pinned/ir {row['pinned_over_ir'] or 0:.3f}", flush=True)
    print(f"\n{len(binaries)} builds, {totals['instances']} instances: {totals['bitwise']} "
          f"bitwise with every baseline, {totals['nondeterministic']} nondeterministic within "
          f"their spread, {totals['failed']} not reproduced; pinned differs on "
          f"{totals['pinned_differs']}")
    print(f"median ir/original {statistics.median(ir_ratio):.3f} "
          f"(min {min(ir_ratio):.3f}, max {max(ir_ratio):.3f}); median pinned/ir "
          f"{statistics.median(pinned_ratio):.3f} (min {min(pinned_ratio):.3f}, "
          f"max {max(pinned_ratio):.3f})")


if __name__ == "__main__":
    main()
