"""Every trial of every study of a record database, as rows for data-driven
compiler research: the kernel (names, IR hash), its launch and arguments,
the full configuration, the outcome, every timed sample, the resources and
the device. Written as Parquet (pyarrow) or as the T4 autotuning-results
JSON schema that Kernel Tuner reads and writes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from mneme_cc.errors import MnemeError, UsageError
from mneme_cc.fileio import replaceable, replaced_atomically, write_text_atomic
from mneme_cc.replay import outcome as oc
from mneme_cc.tune.study_dir import find_studies

#: T4's invalidity for each outcome. Cancelled trials say nothing of their
#: configuration and are left out of T4 (Parquet keeps them).
T4_INVALIDITY = {
    oc.VERIFIED: "correct", oc.NONDETERMINISTIC: "correct",
    oc.FAILED_VERIFICATION: "correctness", oc.COMPILE_ERROR: "compile",
    oc.COMPILE_TIMEOUT: "timeout", oc.INVALID_LAUNCH: "constraints",
    oc.RUNTIME_ERROR: "runtime", oc.TIMEOUT: "timeout", oc.NUMERICS_CHANGING: "correctness",
}
T4_VERSION = "1.0.0"


def _instance_features(db, name: str) -> dict[str, Any]:
    """What a row says of the kernel and its recorded launch (None where the
    instance is no longer in the database)."""
    try:
        inst = db.find(rid=name)
        kernel = db.kernel(inst.static_hash)
        bitcode = kernel.bitcode() if kernel.has_ir else None
    except MnemeError:
        return {}
    return {
        "static_hash": inst.static_hash, "demangled": inst.demangled,
        "ir_sha256": hashlib.sha256(bitcode).hexdigest() if bitcode else None,
        "grid": list(inst.grid), "block": list(inst.block),
        "shared_mem_bytes": inst.shared_mem_bytes, "args_hex": inst.args.hex(),
        "scalar_args": {str(i): int.from_bytes(inst.arg(i), "little")
                        for i in inst.scalar_params()},
        "in_app_ms": inst.in_app_ms,
    }


def rows(database: Path, progress=None) -> list[dict[str, Any]]:
    """One row per trial line of every study (duplicates marked); `progress(total)`,
    when given, is a context manager yielding a step() called after each study."""
    from contextlib import nullcontext

    from mneme_cc.record import RecordDB

    db = RecordDB(database)
    out = []
    studies = find_studies(database)
    with (progress(len(studies)) if progress else nullcontext(lambda: None)) as step:
        for study in studies:
            out += _study_rows(db, study)
            step()
    if not out:
        raise UsageError(f"no trials in {database}: run `mneme tune -rdb {database}` first")
    return out


def _study_rows(db, study) -> list[dict[str, Any]]:
    """One study's rows."""
    if study.damaged_lines:
        print(f"mneme: {study.path / 'trials.jsonl'}: {study.damaged_lines} damaged "
              "line(s) left out", file=sys.stderr)
    summary = study.summary
    features = _instance_features(db, str(summary.get("instance")))
    device = summary.get("device") if isinstance(summary.get("device"), dict) else {}
    return [{
        "study": summary.get("study"), "kernel": summary.get("kernel"),
        "instance": summary.get("instance"), **features,
        "device": device.get("name"), "arch": device.get("arch"),
        "trial": trial.get("trial"), "time": trial.get("time"),
        "params": trial.get("params"), "config": trial.get("config"),
        "outcome": trial.get("outcome"), "duplicate": trial.get("duplicate"),
        "median_ms": trial.get("median_ms"), "samples_ms": trial.get("samples_ms"),
        "raced": bool(trial.get("raced")),
        "registers": trial.get("registers"), "spill_bytes": trial.get("spill_bytes"),
        "occupancy": trial.get("occupancy"), "cubin_bytes": trial.get("cubin_bytes"),
        "error": trial.get("error"), "seconds": trial.get("seconds"),
        "stage_seconds": trial.get("stage_seconds"),
    } for trial in study.trials]


#: Columns kept as JSON text in Parquet: their shape varies from row to row.
_JSON_COLUMNS = ("params", "config", "scalar_args", "stage_seconds")


def write_parquet(table_rows: list[dict[str, Any]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError("Parquet needs pyarrow: pip install pyarrow (or write .json for T4)") \
            from None
    columns: dict[str, list] = {}
    for row in table_rows:
        for key in row:
            columns.setdefault(key, [])
    for row in table_rows:
        for key, values in columns.items():
            value = row.get(key)
            values.append(json.dumps(value, sort_keys=True) if key in _JSON_COLUMNS
                          and value is not None else value)
    with replaced_atomically(path) as tmp:
        pq.write_table(pa.table(columns), tmp)


def t4_results(table_rows: list[dict[str, Any]]) -> dict[str, Any]:
    results = []
    for row in table_rows:
        invalidity = T4_INVALIDITY.get(row["outcome"])
        if invalidity is None or row.get("duplicate"):
            continue
        stages = row.get("stage_seconds") or {}
        measurements = [{"name": "time", "value": row["median_ms"], "unit": "ms"}] \
            if row["median_ms"] is not None else []
        for name, unit in (("registers", ""), ("spill_bytes", "B"), ("cubin_bytes", "B"),
                           ("occupancy", "")):
            if row.get(name) is not None:
                measurements.append({"name": name, "value": row[name], "unit": unit})
        results.append({
            "timestamp": row.get("time") or "",
            "configuration": row.get("config") or {},
            "objectives": ["time"],
            "times": {
                # The configuration's own compile, not what its failure's probe compiled.
                "compilation_time": sum(v for k, v in stages.items()
                                        if k.startswith("compile.") and k != "compile.probe"),
                "runtimes": row.get("samples_ms") or [],
                "framework": sum(v for k, v in stages.items()
                                 if k == "queue" or k in ("gpu.load", "gpu.restore")),
                "search_algorithm": 0.0,
                "validation": stages.get("gpu.verify", 0.0) + stages.get("gpu.probe", 0.0),
            },
            "invalidity": invalidity,
            "correctness": 1 if invalidity == "correct" else 0,
            "measurements": measurements,
        })
    return {"schema_version": T4_VERSION, "results": results}


def export_dataset(database: Path, out: Path, form: str | None = None, progress=None) -> int:
    """Writes the dataset; returns the number of rows (trials) written (`progress`:
    as for rows())."""
    replaceable(out)  # refused before the studies are read
    form = form or {".parquet": "parquet", ".json": "t4"}.get(out.suffix)
    if form not in ("parquet", "t4"):
        raise UsageError(f"{out}: say the format with --format parquet|t4 (or name the file "
                         "*.parquet or *.json)")
    table_rows = rows(database, progress)
    if form == "parquet":
        write_parquet(table_rows, out)
        return len(table_rows)
    document = t4_results(table_rows)
    write_text_atomic(out, json.dumps(document, indent=1))
    return len(document["results"])
