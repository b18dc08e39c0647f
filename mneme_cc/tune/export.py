"""Deployment files from tuned results (each study's `best.json`).

* `PROTEUS_TUNED_KERNELS` JSON: an object keyed by the mangled kernel
  symbol, every field Proteus reads written explicitly with the JSON type
  it reads (strings, ints, bools), exactly as the configuration verified.
  An existing file is merged into, not overwritten.
* mneme-cc's own file: the full best ReplayConfig per kernel and recorded
  launch shape (grid, block, dynamic shared memory), launch geometry
  included, which Proteus cannot express.
"""

from __future__ import annotations

import json
import math
import re
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from mneme_cc.errors import UsageError
from mneme_cc.fileio import locked, read_json_object, write_text_atomic
from mneme_cc.replay.compiling.pipeline import Pipeline
from mneme_cc.replay.config import ReplayConfig
from mneme_cc.tune.space import shape_name

MNEME_FORMAT = {"format": "mneme-tuned-kernels", "version": 1}
#: The compile fields a PROTEUS_TUNED_KERNELS entry carries; any other one
#: (today's tuning, ptxas options, fp_reassociate, ... and tomorrow's) must
#: stay at its default for a config to be exported there.
PROTEUS_CARRIES = ("pipeline", "codegen_opt_level", "specialize_args", "specialize_dims",
                   "launch_bounds", "max_threads", "min_blocks_per_sm")


def proteus_entry(config: ReplayConfig, block: tuple[int, int, int],
                  grid: tuple[int, int, int] | None = None) -> dict[str, Any]:
    """The Proteus fields for a verified config; an error if one cannot be said there.
    `block`, `grid`: the application's launch, which Proteus keeps."""
    defaults = ReplayConfig()
    unexpressed = [name for name in ReplayConfig.COMPILE_FIELDS if name not in PROTEUS_CARRIES
                   and getattr(config, name) != getattr(defaults, name)]
    level = Pipeline.parse(config.pipeline).level
    if level is None:
        unexpressed.append("pipeline (a pass list of llvmlite's pass names)")
    if config.baseline is not None:
        unexpressed.append(f"baseline {config.baseline!r} (nothing was tuned)")
    # The application launches its own geometry, which the tuned bounds may not admit.
    for name, tuned, own in (("block", config.block, block), ("grid", config.grid, grid)):
        if tuned is not None and own is not None and tuple(tuned) != tuple(own):
            unexpressed.append(f"the {name} {shape_name(tuned)} (the application launches "
                               f"{shape_name(own)})")
    if unexpressed:
        raise UsageError("Proteus cannot express " + ", ".join(unexpressed) + "; tune with a "
                         "space that leaves them at their defaults, or deploy mneme-cc's file")
    threads = math.prod(config.block or block)
    return {
        "Pipeline": config.pipeline.strip(),
        "OptLevel": str(level),
        "CodeGenOptLevel": int(config.codegen_opt_level),
        "CodeGen": "rtc",
        "SpecializeArgs": bool(config.specialize_args),
        "LaunchBounds": bool(config.launch_bounds),
        "SpecializeDims": bool(config.specialize_dims),
        "SpecializeDimsRange": False,
        "TunedMaxThreads": int(config.max_threads or threads),
        "MinBlocksPerSM": int(config.min_blocks_per_sm or 0),
    }


def launch_shape(launch: dict[str, Any]) -> str:
    """`grid=X,Y,Z;block=X,Y,Z;smem=N`: the key of a recorded launch shape."""
    return (f"grid={','.join(map(str, launch['grid']))};"
            f"block={','.join(map(str, launch['block']))};smem={launch['shared_mem_bytes']}")


def _load(path: Path, what: str) -> dict[str, Any]:
    """A file export merges into ({} when it does not exist yet)."""
    if not path.exists():
        return {}
    try:
        return read_json_object(path, f"a {what} file")
    except UsageError as exc:
        raise UsageError(f"{exc}; it is merged into, so fix or move it") from None


def export(best_files: list[Path], proteus: Path | None, mneme: Path | None,
           bundle: Path | None = None, database: Path | None = None,
           progress=None) -> dict[str, Any]:
    """Merges each best.json into the two files and writes the bundle; returns
    what was written per kernel. A kernel Proteus cannot express is left out
    of the Proteus file only (`refusals(written)` says why). `progress(total)`,
    when given, is a context manager yielding a step() called after each
    bundled winner."""
    chosen, written = choose(best_files)
    if not chosen:
        return written
    if proteus is not None:
        # One entry per kernel: Proteus does not key by launch shape, so the
        # shape with the largest speedup wins.
        with locked(proteus):
            written.update(_merge_proteus(proteus, chosen))
    if mneme is not None:
        with locked(mneme):
            for kernel, shapes in _merge_mneme(mneme, chosen).items():
                written.setdefault(kernel, {})["mneme"] = shapes
    if bundle is not None:
        with (progress(len(chosen)) if progress else nullcontext(lambda: None)) as step:
            for entry in _bundle(bundle, chosen, database, step):
                written.setdefault(entry.kernel, {}).setdefault("bundle", []).append(entry.cubin)
    return written


def _bundle(path: Path, chosen, database: Path | None, step) -> list:
    """The bundle of the chosen winners, compiled from their instances' IR."""
    from mneme_cc.deploy.bundle import write_bundle
    from mneme_cc.record import RecordDB

    triples = []
    for best_path, record, config in chosen.values():
        # DIR/tune/<study>/best.json belongs to the record database DIR.
        db = RecordDB(database or best_path.resolve().parents[2])
        triples.append((record, config, db.find(rid=str(record.get("instance")))))
    return write_bundle(path, triples, lambda record: str(record.get("arch") or "sm_90"), step)


def choose(best_files: list[Path]) -> tuple[dict, dict[str, Any]]:
    """The fastest verified configuration per kernel and launch shape among the
    best.json files, and the kernels left out (no configuration beat the application)."""
    if not best_files:
        raise UsageError("nothing to export: no best.json (run `mneme tune` first)")
    records = []
    for path in best_files:
        record = read_json_object(path, "a best.json file")
        try:
            config = ReplayConfig.from_json(record["config"])
            launch_shape(record["launch"])
            if not isinstance(record["kernel"], str) or isinstance(record["median_ms"], bool) \
                    or not isinstance(record["median_ms"], (int, float)) \
                    or not 0 < record["median_ms"] < math.inf:
                raise TypeError("kernel or median_ms")
            for key in ("speedup", "measured_speedup"):
                value = record.get(key)
                if value is not None and (isinstance(value, bool)
                                          or not isinstance(value, (int, float))):
                    raise TypeError(f"{key} is not a number")
        except (KeyError, TypeError, ValueError, UsageError) as exc:
            raise UsageError(f"{path}: not a best.json written by `mneme tune` "
                             f"({type(exc).__name__}: {exc})") from None
        records.append((path, record, config))
    # The application's own kernel is a candidate: a study whose best did not
    # beat it deploys nothing.
    skipped = {r["kernel"]: f"{path}: no configuration beat the application "
               f"(measured speedup {r.get('measured_speedup') or 0:.3f}); nothing to deploy"
               for path, r, _ in records if r.get("beats_application") is False}
    records = [(path, r, c) for path, r, c in records if r.get("beats_application") is not False]
    # The fastest verified config per kernel and launch shape.
    chosen: dict[tuple[str, str], tuple[Path, dict, ReplayConfig]] = {}
    for path, record, config in records:
        key = (record["kernel"], launch_shape(record["launch"]))
        if key not in chosen or record["median_ms"] < chosen[key][1]["median_ms"]:
            chosen[key] = (path, record, config)
    written: dict[str, Any] = {kernel: {"skipped": why} for kernel, why in skipped.items()
                               if not any(k == kernel for k, _ in chosen)}
    return chosen, written


def _merge_proteus(proteus: Path, chosen) -> dict[str, Any]:
    """Merges the chosen configs into a PROTEUS_TUNED_KERNELS file (under its lock)."""
    table = _load(proteus, "PROTEUS_TUNED_KERNELS")
    per_kernel: dict[str, tuple[Path, dict, ReplayConfig]] = {}
    for (kernel, _), (path, record, config) in chosen.items():
        if kernel not in per_kernel or (record.get("speedup") or 0) > \
                (per_kernel[kernel][1].get("speedup") or 0):
            per_kernel[kernel] = (path, record, config)
    written: dict[str, Any] = {}
    for kernel, (path, record, config) in per_kernel.items():
        try:
            launch = record["launch"]
            table[kernel] = proteus_entry(config, tuple(launch["block"]), tuple(launch["grid"]))
        except UsageError as exc:
            # Refused for this file only: the other kernels' entries, mneme-cc's
            # file and the bundle are still written. An entry an earlier export
            # wrote (verified then) stays.
            kept = "; its earlier entry there is kept" if kernel in table else ""
            written.setdefault(kernel, {})["proteus_refused"] = \
                f"{record.get('demangled') or kernel}: {exc}{kept}"
            continue
        written.setdefault(kernel, {})["proteus"] = table[kernel]
        if config.specialize_args:
            hint = annotation_hint(kernel, config.specialize_args, path)
            written[kernel]["proteus_annotation"] = hint
            print(f"mneme export: {record.get('demangled') or kernel}: Proteus specialises "
                  f"only annotated arguments: add {hint['annotation']} to the kernel "
                  f"({hint['where']})", file=sys.stderr)
    if any("proteus" in entry for entry in written.values()):
        write_text_atomic(proteus, json.dumps(table, indent=2, sort_keys=True) + "\n")
    return written


def refusals(written: dict[str, Any]) -> list[str]:
    """Why each kernel refused for the Proteus file was not written there."""
    return [entry["proteus_refused"] for entry in written.values() if "proteus_refused" in entry]


def annotation_hint(kernel: str, args, best_path: Path) -> dict[str, Any]:
    """The `annotate("jit", ...)` Proteus needs to specialise these arguments (it
    numbers them from 1), and where the kernel is defined: the source file and,
    from debug information, the line."""
    annotation = f'__attribute__((annotate("jit", {", ".join(str(i + 1) for i in args)})))'
    where = "its definition"
    try:
        from mneme_cc.record import RecordDB
        from mneme_cc.replay.compiling.llvm import llvm_binding

        db = RecordDB(best_path.resolve().parents[2])
        text = str(llvm_binding().parse_bitcode(db.kernel(kernel).bitcode()))
    except Exception:  # noqa: BLE001 - a hint: without the IR, it names no place
        return {"annotation": annotation, "where": where}
    source = re.search(r'^source_filename = "([^"]*)"', text, re.M)
    line = re.search(rf'!DISubprogram\([^)]*linkageName: "{re.escape(kernel)}"[^)]*line: (\d+)',
                     text)
    if source:
        where = source.group(1) + (f":{line.group(1)}" if line else "")
    return {"annotation": annotation, "where": where}


def _merge_mneme(mneme: Path, chosen) -> dict[str, Any]:
    """Merges the chosen configs into mneme-cc's file (under its lock): kernel -> shapes."""
    table = _load(mneme, "mneme-cc tuned-kernels")
    if table and {k: table.get(k) for k in MNEME_FORMAT} != MNEME_FORMAT:
        raise UsageError(f"{mneme}: not a mneme-cc tuned-kernels file (format "
                         f"{table.get('format')!r} version {table.get('version')!r})")
    kernels = table.get("kernels", {})
    if not isinstance(kernels, dict) or not all(isinstance(v, dict) for v in kernels.values()):
        raise UsageError(f"{mneme}: 'kernels' is not an object of kernels and launch shapes; "
                         "it is merged into, so fix or move it")
    table = {**MNEME_FORMAT, "kernels": kernels}
    written: dict[str, Any] = {}
    for (kernel, shape), (_, record, config) in chosen.items():
        entry = {"config": config.to_dict(), "median_ms": record["median_ms"],
                 "baseline_ms": record.get("baseline_ms"), "speedup": record.get("speedup"),
                 "instance": record.get("instance"), "device": record.get("device"),
                 "arch": record.get("arch"), "demangled": record.get("demangled")}
        table["kernels"].setdefault(kernel, {})[shape] = entry
        written.setdefault(kernel, {})[shape] = entry
    write_text_atomic(mneme, json.dumps(table, indent=2, sort_keys=True) + "\n")
    return written
