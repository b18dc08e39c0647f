"""Record overhead: wall time of an example recorded / run natively.

Runs the application natively and under `mneme record` (default options,
a fresh database each time), alternating, and prints the median of each,
their ratio, and the database's stored bytes / raw snapshot bytes.

    python bench/record_overhead.py .carry/examples/cg --repeats 5
    python bench/record_overhead.py .carry/examples/cg --repeats 5 -- 200 2000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from mneme_cc.record.db import RecordDB


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("app")
    parser.add_argument("app_args", nargs="*")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--flags", default="", help="extra `mneme record` flags, one string")
    args = parser.parse_args()
    app = [str(Path(args.app).resolve()), *args.app_args]

    timed(app)  # warm the driver and the file cache
    native, recorded, stored, raw = [], [], 0, 0
    scratch = Path(tempfile.mkdtemp(prefix="mneme-bench-"))
    for i in range(args.repeats):
        seconds, out_native = timed(app)
        native.append(seconds)
        db = scratch / f"db{i}"
        seconds, out_recorded = timed(["mneme", "record", "-rdb", str(db), *args.flags.split(),
                                       "--", *app])
        recorded.append(seconds)
        if out_native != out_recorded:
            raise SystemExit(f"the recorded run printed something else:\n{out_native}\n{out_recorded}")
        rdb = RecordDB(db)
        raw = max(1, sum(inst.raw_bytes for inst in rdb.instances))
        stored = sum(f.stat().st_size for f in db.rglob("*") if f.is_file())
        instances = len(rdb.instances)
        shutil.rmtree(db)
    shutil.rmtree(scratch)
    n, r = statistics.median(native), statistics.median(recorded)
    print(f"app: {' '.join(app)}  (mneme record {args.flags or 'with default options'})")
    print(f"native   median {n:.3f} s  {[round(x, 3) for x in native]}")
    print(f"recorded median {r:.3f} s  {[round(x, 3) for x in recorded]}")
    print(f"overhead ratio (recorded / native): {r / n:.3f}")
    print(f"instances: {instances}; raw snapshot bytes {raw / 2**20:.1f} MiB; database on disk "
          f"{stored / 2**20:.1f} MiB; stored / raw = {stored / raw:.4f}")


if __name__ == "__main__":
    main()
