"""Record overhead: what `mneme record` adds to an application's wall time.

Four parts, each run alternately with native so that drift hits both sides
(each repeat starting one variant later than the one before, so that none
always runs first or last):

- the fixed start: `mneme record -- true` and `mneme-record -- true` (the
  launcher as the environment's command, no Python) against `true`: the
  entry point, the native launcher, the database, the preloaded recorder's
  start and end;
- each application given: median wall time recorded (default options, a
  fresh database each run) / native, its instances and snapshot bytes, and
  where the recorder's time went (its `-v` summary); then the median and
  worst ratio over them, the median with a 90% interval from the runs
  resampled (what the spread of the runs allows it to be); with `--loaded`,
  also the ratio with a `--kernels` filter that drops every kernel (the
  recorder's presence without instances),
  and, from `-v` runs of both alternating with native, the median of each
  stretch of the run (the application's start, the recorder's start with
  the CUDA context in it, the run to its exit, the wait for the writer,
  CUDA's teardown) with and without
  instances, so that what the instances add is set against the spread of
  the parts they do not touch;
- with `--sample` (bench/record_sample.cu, built by scripts/build-gpu-carry):
  the cost of a launch that is not recorded (the slope over two launch counts,
  once with a `--kernels` filter that drops every kernel, once past the
  instance limit) and of a recorded instance (default against the filter
  that drops all, per instance, with its bytes).

Each run starts after a pause (`--settle`, 0.5 s): a CUDA process's exit can
return before the driver has torn its context down, and the next process's
context creation then waits for that teardown, so without the pause a run
pays for the previous one's exit (about 50 ms on an H100). The pause alone
charges no run for the teardown it leaves behind; with `--charge-teardown`,
each run is also charged what a CUDA context made right after it waits
beyond one made on an idle GPU.

With `--against COMMAND` (another recorder's launcher, e.g. an earlier
build's `mneme_cc/lib/mneme-record` installed with `pip install --target`),
each application's runs alternate native, the recorder measured and that
one, and both ratios are given (each median with its interval): two
recorders side by side.

    python bench/record_overhead.py .carry/examples/cg .carry/examples/nbody --repeats 5
    python bench/record_overhead.py --suite .carry/examples --sample .carry/examples/record_sample
    python bench/record_overhead.py --suite .carry/examples --command mneme-record \
        --against /tmp/old/mneme_cc/lib/mneme-record --no-fixed-start
"""

from __future__ import annotations

import argparse
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mneme_cc.record.db import RecordDB

#: Applications of the example suite and their arguments (examples/SUITE.md).
SUITE = ["vector_add", "cg", "stencil3d", "tree_search", "atomic_sum", "big_shared", "multi_tu",
         "reassociation", "fp_physics", "jacobi_norm", "nbody", "microphysics", "xs_lookup",
         "floyd_warshall", "particle_filter", "histogram"]
NONE = "--kernels=^$"  # a filter no kernel name matches


def _checked(result):
    """A cuda-bindings driver call's value; RuntimeError on a CUDA error."""
    from cuda.bindings import driver as cu

    result = result if isinstance(result, tuple) else (result,)
    if result[0] != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{result[0]}")
    return result[1] if len(result) > 1 else None


def _primary_context():
    """Device 0, its primary context made current (from cuInit)."""
    from cuda.bindings import driver as cu

    _checked(cu.cuInit(0))
    device = _checked(cu.cuDeviceGet(0))
    _checked(cu.cuCtxSetCurrent(_checked(cu.cuDevicePrimaryCtxRetain(device))))
    return device


def context_seconds() -> float:
    """How long this process takes to make a CUDA context (from cuInit)."""
    from cuda.bindings import driver as cu

    start = time.perf_counter()
    _primary_context()
    _checked(cu.cuCtxSynchronize())
    return time.perf_counter() - start


#: A process that makes a CUDA context and prints how long that took (s).
CONTEXT_PROBE = (f"import sys\nsys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
                 "import record_overhead\nprint(record_overhead.context_seconds())\n")


class Runner:
    def __init__(self, scratch: Path, against: list[str] | None = None, settle: float = 0.0,
                 charge_teardown: bool = False):
        self.scratch, self.serial, self.settle = scratch, 0, settle
        self.command = ["mneme", "record"]
        # Other recorders run beside the command: per application, the native
        # times and theirs.
        self.against: dict[str, list[tuple[list[float], list[float]]]] = {
            c: [] for c in against or []}
        # With charge_teardown, each run's time also holds what the next CUDA
        # process waits for its teardown: a context made right after it,
        # against one made on an idle GPU.
        self.idle_context = self._idle_context() if charge_teardown else None

    def _context_seconds(self) -> float:
        proc = subprocess.run([sys.executable, "-c", CONTEXT_PROBE], capture_output=True,
                              text=True)
        if proc.returncode:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise SystemExit(f"--charge-teardown: no CUDA context could be made ({last})")
        return float(proc.stdout)

    def _idle_context(self) -> float:
        def after_a_pause() -> float:
            time.sleep(max(self.settle, 0.5))
            return self._context_seconds()
        seconds = statistics.median(after_a_pause() for _ in range(5))
        print(f"a CUDA context on an idle GPU: {1e3 * seconds:.1f} ms (median of 5); each run "
              "is charged what the next one waits beyond it", flush=True)
        return seconds

    def _left_behind(self) -> float:
        """What the last run left for the next CUDA process to wait for (its
        noise either way, unclipped, so that it biases neither side)."""
        if self.idle_context is None:
            return 0.0
        return self._context_seconds() - self.idle_context

    def native(self, app: list[str]) -> tuple[float, str]:
        time.sleep(self.settle)
        start = time.perf_counter()
        proc = subprocess.run(app, capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - start
        return seconds + self._left_behind(), proc.stdout

    def recorded(self, app: list[str], *flags: str,
                 command: list[str] | None = None) -> tuple[float, str, str, Path]:
        self.serial += 1
        db = self.scratch / f"db{self.serial}"
        time.sleep(self.settle)
        start = time.perf_counter()
        proc = subprocess.run([*(command or self.command), "-rdb", str(db), *flags, "--", *app],
                              capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - start
        return seconds + self._left_behind(), proc.stdout, proc.stderr, db


def alternate(runner: Runner, app: list[str], repeats: int, *flags: str,
              others: dict[str, list[float]] | None = None):
    """(native times, recorded times, the last recorded run's stderr and database);
    each repeat also records with each command of `others`, into its list. Each
    repeat starts one variant later than the one before, so that none always
    runs in the same place (first after the warm-up, or last)."""
    runner.native(app)  # warm the driver and the file cache
    native, recorded, last = [], [], ("", None)
    expected: list[str] = []

    def same(out: str) -> None:
        if expected and out != expected[0]:
            raise SystemExit(f"{app[0]}: the recorded run printed something else:\n"
                             f"{expected[0]}\n{out}")
        expected[:1] = [out]

    def run_native() -> None:
        seconds, out = runner.native(app)
        native.append(seconds)
        same(out)

    def run_recorded() -> None:
        nonlocal last
        if last[1] is not None:
            shutil.rmtree(last[1])
        seconds, out, err, db = runner.recorded(app, *flags)
        recorded.append(seconds)
        same(out)
        last = (err, db)

    def run_other(command: str, times: list[float]) -> None:
        seconds, out, _, other_db = runner.recorded(app, *flags, command=shlex.split(command))
        shutil.rmtree(other_db)
        times.append(seconds)
        same(out)

    variants = [run_native, run_recorded,
                *(lambda c=c, t=t: run_other(c, t) for c, t in (others or {}).items())]
    for i in range(repeats):
        for variant in rotated(variants, i):
            variant()
    return native, recorded, *last


def rotated(items: list, i: int) -> list:
    """items, starting at the i-th (wrapping): repeat i's order of variants."""
    i %= len(items)
    return items[i:] + items[:i]


def suite_ratios(runs: list[tuple[list[float], list[float]]]) -> str:
    """The median ratio over applications with its interval, and the worst,
    from (native times, recorded times) per application."""
    ratios = [statistics.median(r) / statistics.median(n) for n, r in runs]
    low, high = median_interval(runs)
    return (f"median ratio {statistics.median(ratios):.3f} (90% interval {low:.3f}-{high:.3f}, "
            f"the runs resampled), worst {max(ratios):.3f}")


def median_interval(runs: list[tuple[list[float], list[float]]], draws: int = 2000,
                    seed: int = 1) -> tuple[float, float]:
    """A 90% interval for the median over applications of recorded / native,
    from (native times, recorded times) per application: each draw resamples
    every application's runs of each kind with replacement."""
    rng = random.Random(seed)

    def resampled(times: list[float]) -> float:
        return statistics.median(rng.choices(times, k=len(times)))

    medians = sorted(statistics.median(resampled(r) / resampled(n) for n, r in runs)
                     for _ in range(draws))
    return medians[int(0.05 * draws)], medians[int(0.95 * draws) - 1]


def fixed_start(runner: Runner, repeats: int) -> None:
    # Programs without CUDA leave no teardown: a charge would only add its noise.
    idle, runner.idle_context = runner.idle_context, None
    try:
        measure_fixed_start(runner, repeats)
    finally:
        runner.idle_context = idle


def measure_fixed_start(runner: Runner, repeats: int) -> None:
    python = statistics.median(runner.native([sys.executable, "-c", "pass"])[0]
                               for _ in range(repeats))
    for command in (["mneme", "record"], ["mneme-record"]):
        runner.command = command
        native, recorded, _, _ = alternate(runner, ["true"], repeats)
        _, _, err, _ = runner.recorded(["true"], "-v")
        cpu = re.search(r"([\d.]+) ms of CPU in mneme record", err)
        print(f"fixed start of {' '.join(command)}: "
              f"{1e3 * (statistics.median(recorded) - statistics.median(native)):.1f} ms "
              f"(median of {repeats}, against true; {cpu.group(1) if cpu else '?'} ms of CPU "
              "before the application starts)")
    runner.command = ["mneme", "record"]
    print(f"  the Python interpreter's own start (python -c pass): {1e3 * python:.1f} ms")


def spread(times: list[float]) -> str:
    """The runs' range against their median, which the ratios are read within."""
    return f"±{50 * (max(times) - min(times)) / statistics.median(times):.1f}%"


def application(runner: Runner, app: list[str], repeats: int,
                loaded: bool) -> tuple[list[float], list[float]]:
    """Its line (and its breakdown); returns its (native, recorded) times."""
    others: dict[str, list[float]] = {c: [] for c in runner.against}
    native, recorded, err, db = alternate(runner, app, repeats, others=others)
    _, _, verbose, _ = runner.recorded(app, "-v")
    rdb = RecordDB(db)
    raw = sum(inst.raw_bytes for inst in rdb.instances)
    stored = sum(f.stat().st_size for f in db.rglob("*") if f.is_file())
    n, r = statistics.median(native), statistics.median(recorded)
    print(f"{Path(app[0]).name:16s} native {n:7.3f} s  recorded {r:7.3f} s  ratio {r / n:5.3f}  "
          f"{len(rdb.instances):3d} instances  {raw / 2**20:8.1f} MiB raw  "
          f"{stored / max(raw, 1):.3f} stored/raw  (runs spread: native {spread(native)}, "
          f"recorded {spread(recorded)})")
    for command, times in others.items():
        ratio = statistics.median(times) / n
        runner.against[command].append((native, times))
        print(f"{'':16s} against {command}: recorded {statistics.median(times):7.3f} s  "
              f"ratio {ratio:5.3f}")
    if loaded:  # the recorder serving allocations, recording nothing
        native_again, none, _, _ = alternate(runner, app, repeats, NONE)
        print(f"{'':16s} with {NONE}: ratio "
              f"{statistics.median(none) / statistics.median(native_again):5.3f}")
        stretches(runner, app, repeats)
    # Where it went (docs/record.md): the recorder's own lines of the -v run.
    for pattern in (r"recording took (.*)", r"(\d+ instance\(s\) took .*)",
                    r"the instances' time on the application's threads, (by phase.*)",
                    r"of it: (\d+ snapshot hash.*)", r"the writer: (.*)", r"timeline, (.*)",
                    r"(the recorder's start took .*)"):
        if found := re.search(pattern, verbose):
            print(f"{'':16s} {found.group(1)}")
    return native, recorded


#: The -v lines each stretch of a recorded run is read from (ms).
TIMELINE = {"started": r"recording started ([\d.]+)", "context": r"recorder's start took ([\d.]+) ms",
            "exited": r"application exited at ([\d.]+)", "done": r"writer done at ([\d.]+)",
            "ran": r"application ran ([\d.]+) ms",
            "instances": r"instance\(s\) took ([\d.]+) ms on the application's threads"}


def timeline(verbose: str) -> dict[str, float] | None:
    """A recorded run's stretches in ms, from its -v lines (None if one is missing)."""
    found = {k: re.search(p, verbose) for k, p in TIMELINE.items()}
    if not all(found.values()):
        return None
    t = {k: float(m.group(1)) for k, m in found.items()}
    return {"application's start": t["started"], "recorder's start": t["context"],
            "run to exit": t["exited"] - t["started"] - t["context"],
            "writer at exit": t["done"] - t["exited"], "teardown": t["ran"] - t["done"],
            "on the app's threads": t["instances"]}


def stretches(runner: Runner, app: list[str], repeats: int) -> None:
    """Medians of each stretch, default against nothing recorded, -v runs alternating."""
    variants = {"default": ("-v",), NONE: ("-v", NONE)}
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for i in range(repeats):
        for variant, flags in rotated(list(variants.items()), i):  # each first in turn
            _, _, verbose, db = runner.recorded(app, *flags)
            shutil.rmtree(db)
            if (t := timeline(verbose)) is not None:
                runs[variant].append(t)
    if not all(runs.values()):
        print(f"{'':16s} (no -v timeline to break down)")
        return
    medians = {v: {k: statistics.median(t[k] for t in ts) for k in ts[0]}
               for v, ts in runs.items()}
    print(f"{'':16s} stretches, median ms, default / {NONE} (difference): " + ", ".join(
        f"{k} {medians['default'][k]:.1f} / {medians[NONE][k]:.1f} "
        f"({medians['default'][k] - medians[NONE][k]:+.1f})" for k in medians["default"]))


def sample(runner: Runner, path: str, repeats: int, launches: tuple[int, int]) -> None:
    """Per unrecorded launch and per recorded instance, from record_sample."""
    def median_extra(count: int, *flags: str) -> tuple[float, int, int]:
        native, recorded, _, db = alternate(runner, [path, str(count)], repeats, *flags)
        rdb = RecordDB(db)
        return (statistics.median(recorded) - statistics.median(native), len(rdb.instances),
                sum(inst.raw_bytes for inst in rdb.instances))

    for what, flags in (("a kernel the filter drops", (NONE,)),
                        ("past the instance limit", ())):
        (low, *_), (high, *_) = (median_extra(count, *flags) for count in launches)
        per = (high - low) / (launches[1] - launches[0])
        print(f"unrecorded launch, {what}: {per * 1e6:.2f} µs over native "
              f"({launches[0]} and {launches[1]} launches)")
    dropped, _, _ = median_extra(launches[0], NONE)
    kept, instances, raw = median_extra(launches[0])
    _, _, verbose, _ = runner.recorded([path, str(launches[0])], "-v")
    copied = re.search(r"copying ([\d.]+) MiB", verbose)
    moved = float(copied.group(1)) / max(instances, 1) if copied else raw / instances / 2**20
    print(f"recorded instance: {(kept - dropped) / instances * 1e3:.2f} ms each "
          f"({instances} instances, {raw / instances / 2**20:.1f} MiB raw and {moved:.1f} MiB "
          "copied to the host each)")
    # The wall-time difference carries the runs' spread and charges the instances
    # with the launches past the limit (decided slower than filtered ones); -v
    # times what the instances themselves take on the application's threads.
    took = re.search(r"(\d+) instance\(s\) took ([\d.]+) ms on the application's", verbose)
    decide = re.search(r"(\d+) launch\(es\) passed on unrecorded, ([\d.]+) us each", verbose)
    if took and int(took.group(1)):
        print(f"  on the application's threads (-v): {float(took.group(2)) / int(took.group(1)):.2f}"
              f" ms each; {decide.group(1) if decide else '?'} launches passed on, "
              f"{decide.group(2) if decide else '?'} µs each to decide")
    gbps = device_to_host_gbps()
    if gbps:
        print(f"  device-to-host bandwidth {gbps:.1f} GB/s (pinned, 256 MiB): the target is "
              f"1 ms + {moved:.1f} MiB at half of it = "
              f"{1 + moved * 2**20 / (gbps * 1e9 / 2) * 1e3:.2f} ms")


def device_to_host_gbps(size: int = 256 << 20) -> float | None:
    """The best of 5 pinned device-to-host copies of `size` bytes, in GB/s
    (None without cuda-bindings or a GPU)."""
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return None
    try:
        device = _primary_context()
        source, target = _checked(cu.cuMemAlloc(size)), _checked(cu.cuMemAllocHost(size))
        _checked(cu.cuMemcpyDtoH(target, source, size))  # the first copy maps the pages
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            _checked(cu.cuMemcpyDtoH(target, source, size))
            best = min(best, time.perf_counter() - start)
        _checked(cu.cuMemFreeHost(target))
        _checked(cu.cuMemFree(source))
        _checked(cu.cuDevicePrimaryCtxRelease(device))
        return size / best / 1e9
    except RuntimeError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("apps", nargs="*", help="an application and its arguments, quoted")
    parser.add_argument("--suite", metavar="DIR", help="every example of the suite in DIR")
    parser.add_argument("--sample", metavar="PATH", help="bench/record_sample.cu, built")
    parser.add_argument("--launches", default="50000,150000",
                        help="the sample's two launch counts (default 50000,150000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--command", default="mneme record",
                        help="how the applications are recorded: 'mneme record' (default) "
                             "or 'mneme-record', the launcher without Python's start")
    parser.add_argument("--no-fixed-start", action="store_true",
                        help="skip the fixed start's measurement")
    parser.add_argument("--against", action="append", metavar="COMMAND", default=[],
                        help="another recorder's command, run alternating with --command "
                             "(its ratios beside; may be given more than once)")
    parser.add_argument("--loaded", action="store_true",
                        help=f"also each application recorded with {NONE} against native: "
                             "the recorder loaded and serving allocations, no instance")
    parser.add_argument("--settle", type=float, default=0.5, metavar="SECONDS",
                        help="pause before each run (default 0.5), so that no run pays for "
                             "the previous one's CUDA teardown, which the driver may finish "
                             "after that process is reaped")
    parser.add_argument("--charge-teardown", action="store_true",
                        help="charge each run what a CUDA context made right after it waits "
                             "beyond one made on an idle GPU (the teardown it left behind; "
                             "needs cuda-bindings)")
    args = parser.parse_args()
    apps = [shlex.split(a) for a in args.apps]
    if args.suite:
        apps += [[str(Path(args.suite) / name)] for name in SUITE
                 if (Path(args.suite) / name).is_file()]
    scratch = Path(tempfile.mkdtemp(prefix="mneme-bench-"))
    try:
        runner = Runner(scratch, args.against, args.settle, args.charge_teardown)
        if not args.no_fixed_start:
            fixed_start(runner, max(args.repeats, 11))
        runner.command = args.command.split()
        runs = [application(runner, [str(Path(a[0]).resolve()), *a[1:]], args.repeats,
                            args.loaded)
                for a in apps]
        if runs:
            print(f"over {len(runs)} applications: {suite_ratios(runs)}")
            for command, theirs in runner.against.items():
                print(f"  against {command}: {suite_ratios(theirs)} (the same runs)")
        if args.sample:
            low, high = (int(x) for x in args.launches.split(","))
            sample(runner, str(Path(args.sample).resolve()), args.repeats, (low, high))
    finally:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
