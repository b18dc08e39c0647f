"""What a study's GPU worker costs to start, and to replace after a fault.

A replay that faults loses its CUDA context, so the study's GPU worker is
killed and a fresh one started (`mneme_cc/tune/workers.py`): the fresh one
spawns an interpreter, imports the replayer, opens the GPU, restores the
instance's prologue and reads its epilogue again. For each suite
application given, this records its main kernel (one instance, as
`tune_suite.py` does) and prints, medians of REPEATS:

- the worker's start as a study sees it (`GpuWorker`: spawn to its hello)
  and a restart (`_restart()`: the kill, then the same start);
- the same start by phase, in a spawned process: the interpreter's spawn,
  the imports, reading the instance, the GPU's context, reading the
  prologue's chunks (host only), the prologue's restore (its reads again,
  mapping, copies), the launch timer, the epilogue (`prepare_verification`),
  and the close.

Run on the GPU machine from the repository root, after scripts/build-gpu-carry:

    python bench/worker_start.py .carry/examples --only histogram,nbody --repeats 3
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_suite import SUITE, _record  # noqa: E402

PHASES = ("spawn", "imports", "instance", "context", "prologue read", "prologue restore",
          "timer", "epilogue", "close")


def _phases(conn, db: str, name: str, spawned: float) -> None:
    """A worker's start, step by step (monotonic clocks are shared by processes)."""
    marks = [("spawn", time.monotonic() - spawned)]
    clock = time.monotonic()

    def mark(what: str) -> None:
        nonlocal clock
        now = time.monotonic()
        marks.append((what, now - clock))
        clock = now

    from mneme_cc.record import RecordDB
    from mneme_cc.replay.running.replayer import Replayer
    mark("imports")
    inst = RecordDB(db).find(rid=name)
    replayer = Replayer(inst, device=0, brief_failures=True, compile_probes=False)
    mark("instance")
    from mneme_cc.replay.running import device as dev
    from mneme_cc.replay.running.device_state import DeviceState
    from mneme_cc.replay.running.timer import LaunchTimer
    device = dev.Device(0)
    mark("context")
    size = sum(len(region.read()) for region in inst.prologue.allocations)
    mark("prologue read")
    state = DeviceState(device, inst)
    mark("prologue restore")
    timer = LaunchTimer(device)
    mark("timer")
    replayer.device, replayer.state, replayer.timer = device, state, timer
    replayer.prepare_verification()
    mark("epilogue")
    replayer.close()
    mark("close")
    conn.send((marks, size))


def phases(db: Path, name: str) -> tuple[dict[str, float], int]:
    spawn = multiprocessing.get_context("spawn")
    conn, child = spawn.Pipe()
    process = spawn.Process(target=_phases, args=(child, str(db), name, time.monotonic()))
    process.start()
    marks, size = conn.recv()
    process.join()
    return dict(marks), size


def worker_start(db: Path, name: str) -> tuple[float, float]:
    """(a GpuWorker's first start, its restart), seconds."""
    from mneme_cc.tune.workers import GpuWorker

    worker = GpuWorker(str(db), name, None, 0)
    try:
        first = worker.start_seconds
        began = time.perf_counter()
        why = worker._restart()
        if why:
            raise RuntimeError(why)
        return first, time.perf_counter() - began
    finally:
        worker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path, help="the built example suite")
    parser.add_argument("--only", default="histogram,nbody,stencil3d,cg",
                        help="comma-separated suite applications")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from mneme_cc.record import RecordDB

    chosen = args.only.split(",")
    unknown = set(chosen) - {name for name, _, _ in SUITE}
    if unknown:
        parser.error(f"not in the suite: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="mneme-worker-start-") as scratch:
        for app, app_args, kernel in SUITE:
            if app not in chosen:
                continue
            db = Path(scratch) / app
            _record(args.examples, db, app, app_args, kernel, 1)
            name = RecordDB(db).instances[0].name
            starts, restarts, steps, size = [], [], {p: [] for p in PHASES}, 0
            for _ in range(args.repeats):
                first, again = worker_start(db, name)
                starts.append(first)
                restarts.append(again)
                marks, size = phases(db, name)
                for phase in PHASES:
                    steps[phase].append(marks[phase])
            print(f"{app:16} worker start {statistics.median(starts):.2f} s, restart "
                  f"{statistics.median(restarts):.2f} s; prologue {size / 2**20:.0f} MiB")
            print(" " * 17 + ", ".join(f"{p} {statistics.median(steps[p]):.3f}"
                                       for p in PHASES))


if __name__ == "__main__":
    main()
