"""Saved replay outputs: the device state after a replay, kept for `mneme diff`.

A saved output is a directory in the record database's format (the same
content-addressed, compressed chunk store, docs/record-db.md) holding one
snapshot, `output.mneme`, whose regions are the recorded epilogue's
(allocations by address, globals by name), and `output.json`, which says
what produced it: the database and instance, the configuration, the outcome.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mneme_cc.errors import RecordDBError, UsageError
from mneme_cc.fileio import write_text_atomic
from mneme_cc.record.db import RecordDB, load_json_object
from mneme_cc.record.snapshot import EPILOGUE, Snapshot, native

STATE, META = "output.mneme", "output.json"


@dataclass
class SavedRegion:
    kind: int
    name: str
    address: int
    data: np.ndarray  # uint8


def check_new(path: str | Path) -> Path:
    """path, when it can take a saved output (it does not exist, or is empty)."""
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UsageError(f"--save-output {path}: exists and is not empty; name a new directory")
    return path


def save_output(path: Path, instance, regions: list[SavedRegion], about: dict[str, Any]) -> Path:
    """Writes regions as a saved output at path (a new or empty directory)."""
    path = check_new(path)
    store = native()
    store.init_database(str(path))
    chunk = instance.prologue.chunk_size
    state_regions = []
    for r in regions:
        raw = r.data.tobytes()
        chunks = [(i, store.write_chunk(str(path), raw[i * chunk:(i + 1) * chunk], 1)[0])
                  for i in range(-(-len(raw) // chunk))]
        state_regions.append({"kind": r.kind, "name": r.name, "address": r.address,
                              "size": len(raw), "chunks": chunks})
    meta = {"format": "mneme-output", "version": 1, "database": str(instance.db.path),
            "instance": instance.name, "kernel": instance.kernel_name, **about}
    (path / STATE).write_bytes(store.encode_state({
        "kind": EPILOGUE, "chunk_size": chunk, "metadata": json.dumps(meta),
        "regions": state_regions}))
    write_text_atomic(path / META, json.dumps(meta, indent=2))
    return path


def open_output(path: Path) -> tuple[dict[str, Any], Snapshot]:
    """(what produced it, its snapshot) of a saved output."""
    path = Path(path)
    if not (path / META).exists() or not (path / STATE).exists():
        raise UsageError(f"{path}: not a saved replay output (no {META}); write one with "
                         "`mneme replay ... --save-output DIR`")
    try:
        meta = load_json_object(path / META)
    except (RecordDBError, OSError):
        meta = {}
    if not all(isinstance(meta.get(k), str) for k in ("database", "instance")):
        raise UsageError(f"{path / META}: not what a saved replay output holds (it is "
                         "damaged); save it again with `mneme replay ... --save-output DIR`")
    return meta, Snapshot(RecordDB(path), path / STATE, kind=EPILOGUE)
