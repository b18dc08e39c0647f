"""Deployment end to end: does a kernel tuned in isolation make the
application itself faster under `mneme run --tuned`?

For one example application and its arguments: record its main kernel (one
instance), tune it with `--timeout BUDGET`, export a bundle, then run the
application alternately, REPEATS times each:

    native      the application alone (wall time, output)
    preload     the application with the runtime preloaded, serving an empty
                bundle's table (what the runtime costs the application)
    empty       `mneme run` with an empty bundle (the runtime's cost plus
                `mneme run`'s own start and end)
    passed      `mneme run --time-kernels` with the empty bundle: every kernel
                passes through and is timed with CUDA events (the native
                kernel time, measured the way served launches are)
    served      `mneme run` with the bundle (tuned kernels timed)

and report median wall times, the tuned kernels' summed time natively and
served, whether the output is identical (every line, checksums included),
the application's kernel-time speedup and its ratio to the speedup replay
measured in isolation (the bundle's baseline_ms / median_ms), and the
empty-bundle overheads (the preloaded runtime alone, and all of `mneme
run`). Run on the GPU machine from the repository root, after
scripts/build-gpu-carry and with mneme-cc installed:

    PYTHONPATH=/tmp/site python3 bench/deploy_e2e.py .carry/examples cg \\
        --args 200 2000 --kernels '^_Z4spmv' --budget 60
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def mneme(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(["mneme", *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        sys.exit(f"deploy_e2e: mneme {args[0]} failed: "
                 f"{(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return out


def prepare(app: Path, args: list[str], kernels: str, budget: float, space: str,
            scratch: Path, force: bool) -> tuple[Path, list[dict]]:
    """Record, tune and export; the bundle and its entries."""
    db = scratch / "rdb"
    mneme("record", "-rdb", str(db), "--kernels", kernels, "--max-instances", "1", "--",
          str(app), *args)
    mneme("tune", "-rdb", str(db), "--space", space, "--trials", "100000", "--timeout",
          str(budget), "--json")
    if force:  # measure serving even when no configuration beat the application
        for best in (db / "tune").glob("*/best.json"):
            record = json.loads(best.read_text())
            if not record["config"].get("baseline"):
                best.write_text(json.dumps({**record, "beats_application": True}))
    bundle = scratch / "bundle"
    out = mneme("export", "-rdb", str(db), "--bundle", str(bundle), check=False)
    if not (bundle / "manifest.json").exists():
        print(f"deploy_e2e: nothing bundled ({out.stderr.strip()}); rerun with --force "
              "to measure serving anyway", file=sys.stderr)
        return bundle, []
    return bundle, json.loads((bundle / "manifest.json").read_text())["kernels"]


def timed(command: list[str], env: dict[str, str] | None = None
          ) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    return time.perf_counter() - started, out


def kernel_ms(report: Path, names: set[str]) -> float | None:
    doc = json.loads(report.read_text())
    times = [k["kernel_ms"] for k in doc["kernels"] if k["kernel"] in names]
    return sum(times) if times and None not in times else None


def measure(app: Path, args: list[str], bundle: Path, empty: Path, names: set[str],
            repeats: int, scratch: Path) -> dict:
    from mneme_cc.deploy import load_bundle, write_table
    from mneme_cc.deploy.run import environment

    table = write_table(load_bundle(empty), directory=scratch)
    preload = environment(table.path)
    runs: dict[str, list] = {"native": [], "preload": [], "empty": [], "passed": [],
                             "served": []}
    ms: dict[str, list] = {"passed": [], "served": []}
    outputs: dict[str, set[str]] = {"native": set(), "served": set()}
    served_counts = []
    report = scratch / "report.json"
    for _ in range(repeats):
        for kind in runs:
            prefix = {"native": [], "preload": [],
                      "empty": ["mneme", "run", "-q", "--tuned", str(empty)],
                      "passed": ["mneme", "run", "-q", "--tuned", str(empty), "--time-kernels",
                                 "--report", str(report)],
                      "served": ["mneme", "run", "-q", "--tuned", str(bundle), "--report",
                                 str(report)]}[kind]
            command = [*prefix, "--", str(app), *args] if prefix else [str(app), *args]
            wall, out = timed(command, preload if kind == "preload" else None)
            if out.returncode != 0:
                sys.exit(f"deploy_e2e: the {kind} run exited {out.returncode}: "
                         f"{out.stderr.strip()[-300:]}")
            runs[kind].append(wall)
            if kind in outputs:
                outputs[kind].add(out.stdout)
            if kind in ms:
                ms[kind].append(kernel_ms(report, names))
            if kind == "served":
                doc = json.loads(report.read_text())
                served_counts.append({k["kernel"]: [k["served"], k["launches"]]
                                      for k in doc["kernels"] if k["kernel"] in names})
    table.close()
    med = {k: statistics.median(v) for k, v in runs.items()}
    kms = {k: statistics.median(v) if v and None not in v else None for k, v in ms.items()}
    return {"wall_s": med, "wall_all_s": runs, "kernel_ms": kms,
            "output_identical": len(outputs["native"] | outputs["served"]) == 1,
            "checksums": sorted({line for text in outputs["native"] | outputs["served"]
                                 for line in text.splitlines() if "checksum" in line}),
            "served": served_counts[-1] if served_counts else {},
            "runtime_overhead": med["preload"] / med["native"],
            "empty_overhead": med["empty"] / med["native"],
            "served_wall_ratio": med["served"] / med["native"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path)
    parser.add_argument("app")
    parser.add_argument("--args", nargs="*", default=[], help="the application's arguments")
    parser.add_argument("--kernels", required=True, help="regex of the kernel(s) to tune")
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--space", default="auto")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--force", action="store_true",
                        help="bundle the best verified configuration even when it did not "
                             "beat the application")
    parser.add_argument("--json", type=Path, help="also write the result here")
    a = parser.parse_args()
    app = a.examples / a.app
    with tempfile.TemporaryDirectory(prefix="mneme-deploy-") as tmp:
        scratch = Path(tmp)
        bundle, entries = prepare(app, a.args, a.kernels, a.budget, a.space, scratch, a.force)
        empty = scratch / "empty"
        empty.mkdir()
        (empty / "manifest.json").write_text(json.dumps(
            {"format": "mneme-bundle", "version": 1, "kernels": []}))
        if not entries:
            bundle = empty
        names = {e["kernel"] for e in entries}
        result = measure(app, a.args, bundle, empty, names, a.repeats, scratch)
    isolated = [e["baseline_ms"] / e["median_ms"] for e in entries if e.get("baseline_ms")]
    native_ms, served_ms = result["kernel_ms"]["passed"], result["kernel_ms"]["served"]
    in_app = native_ms / served_ms if native_ms and served_ms else None
    result.update({
        "app": a.app, "args": a.args, "budget_s": a.budget, "bundled": entries and [
            {"kernel": e["demangled"], "launch": e["launch"], "serve": e["serve"],
             "isolated_speedup": e["baseline_ms"] / e["median_ms"]
             if e.get("baseline_ms") else None} for e in entries],
        "in_app_kernel_speedup": in_app,
        "isolated_speedup": statistics.median(isolated) if isolated else None,
        "in_app_over_isolated": in_app / statistics.median(isolated)
        if in_app and isolated else None})
    print(json.dumps({k: v for k, v in result.items() if k != "wall_all_s"}, indent=2))
    if a.json:
        a.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
