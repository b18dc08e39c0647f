"""Where a run's time goes, stamped from outside the recorder, native against each variant.

`stretch_stamp.c` (built with `cc` here) is preloaded into every process of a
run; it stamps its load and its last exit handler, which runs after every
library's destructors. With the parent's spawn and reaping, each run splits in
three stretches:

- to load: the spawn to the application's load (a launcher's own start among it);
- the run: the load to the last exit handler, after every library's destructors
  (the CUDA context, the kernels, the exit handlers, the recorder's work at exit,
  the CUDA runtime's and driver's own teardown in the process);
- the exit: the last exit handler to the reaping (the kernel's teardown of the
  process and what is left of its CUDA context; under a launcher, also the
  launcher's own end).

A variant is a command put before the application (`{db}` becomes a fresh
directory each run); `--preloaded` adds the installed recorder preloaded with no
database. Variants alternate with native, each repeat starting one later than
the one before, each run after a pause (`--settle`). Printed: per application
the median of each stretch and its difference to native, then the median of
those differences over the applications.

    python bench/run_stretches.py .carry/examples/vector_add .carry/examples/stencil3d \\
        --repeats 8 --preloaded --variant 'mneme-record -rdb {db} --kernels=^$ --' \\
        --variant 'mneme-record -rdb {db} --'
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STRETCHES = ("to load", "the run", "the exit", "wall")


def build_stamp(workdir: Path) -> Path:
    """The stamping library, built from stretch_stamp.c beside this script."""
    out = workdir / "stretch_stamp.so"
    source = Path(__file__).with_name("stretch_stamp.c")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(out), str(source)], check=True)
    return out


def recorder_library() -> Path:
    """The installed package's recorder, as `mneme record` preloads it."""
    import mneme_cc

    return Path(mneme_cc.__file__).parent / "lib" / "libmneme_record.so"


def one_run(command: list[str], preload: str, workdir: Path) -> tuple[float, ...]:
    """(to load, the run, the exit, wall) in ms for one run of `command`."""
    stamps = workdir / "stamps"
    stamps.unlink(missing_ok=True)
    env = dict(os.environ, LD_PRELOAD=preload, MNEME_STAMP_FILE=str(stamps))
    spawned = time.monotonic_ns()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    reaped = time.monotonic_ns()
    if done.returncode != 0:
        raise SystemExit(f"run_stretches: {shlex.join(command)} exited with "
                         f"{done.returncode}; run it by hand to see why")
    # The application's own line, not a launcher's or a helper process's.
    app = os.path.realpath(command[-1])
    lines = [line.split(" ", 3) for line in
             (stamps.read_text().splitlines() if stamps.exists() else [])]
    mine = [fields for fields in lines if len(fields) == 4 and fields[3] == app]
    if not mine:
        raise SystemExit(f"run_stretches: {app} left no stamp (it ended without its exit "
                         "handlers, or could not write to the temporary directory)")
    loaded, last = int(mine[-1][1]), int(mine[-1][2])
    return tuple(ms / 1e6 for ms in (loaded - spawned, last - loaded, reaped - last,
                                     reaped - spawned))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("apps", nargs="+", help="application binaries (run without arguments)")
    parser.add_argument("--variant", action="append", default=[],
                        help="a command put before the application; {db}: a fresh directory")
    parser.add_argument("--preloaded", action="store_true",
                        help="also the recorder preloaded with no database")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--settle", type=float, default=0.5,
                        help="seconds of pause before each run")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    missing = [a for a in args.apps if not os.access(a, os.X_OK)]
    if missing:
        parser.error(f"not an executable: {missing[0]}")
    if {"native", "preloaded"} & set(args.variant):
        parser.error("a --variant is a command put before the application; "
                     "'native' and 'preloaded' name the built-in ones")
    # A recorder preloaded with no database must not find one in the environment.
    for name in [n for n in os.environ if n.startswith("MNEME_")]:
        del os.environ[name]

    with tempfile.TemporaryDirectory(prefix="mneme-stretches-") as tmp:
        workdir = Path(tmp)
        stamp = str(build_stamp(workdir))
        variants: dict[str, tuple[list[str], str]] = {"native": ([], stamp)}
        if args.preloaded:
            variants["preloaded"] = ([], f"{recorder_library()}:{stamp}")
        for text in args.variant:
            variants[text] = (shlex.split(text), stamp)
        runs: dict[tuple[str, str], list[tuple[float, ...]]] = {}
        names = list(variants)
        for app in args.apps:
            order = names[:]
            for _ in range(args.repeats):
                order = order[1:] + order[:1]
                for name in order:
                    prefix, preload = variants[name]
                    db = workdir / "db"
                    shutil.rmtree(db, ignore_errors=True)
                    command = [part.replace("{db}", str(db)) for part in prefix] + [app]
                    time.sleep(args.settle)
                    runs.setdefault((app, name), []).append(one_run(command, preload, workdir))

    def median(app: str, name: str, i: int) -> float:
        return statistics.median(r[i] for r in runs[(app, name)])

    for app in args.apps:
        print(Path(app).name)
        for name in names:
            cells = "  ".join(f"{s} {median(app, name, i):7.1f} "
                              f"({median(app, name, i) - median(app, 'native', i):+6.1f})"
                              for i, s in enumerate(STRETCHES))
            print(f"  {name:40.40s} {cells}")
    print(f"ms beyond native, the median over {len(args.apps)} application(s), "
          f"{args.repeats} runs each:")
    for name in names[1:]:
        cells = "  ".join(
            f"{s} {statistics.median(median(a, name, i) - median(a, 'native', i) for a in args.apps):+.1f}"
            for i, s in enumerate(STRETCHES))
        print(f"  {name:40.40s} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
