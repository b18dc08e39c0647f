"""Record: run an application with the recorder, and read what it wrote.

    from mneme_cc.record import RecordDB
    db = RecordDB("rdb")
    inst = db.find(kernel="vector_add")

Names are resolved on first use: `mneme record` starts without numpy.
"""

from __future__ import annotations

__all__ = ["CompactResult", "Instance", "MergeResult", "RecordDB", "RecordSettings",
           "RecordedKernel", "Region", "Snapshot", "compact_database", "merge_databases",
           "run_recorded"]

_HOME = {"Instance": "db", "RecordDB": "db", "RecordedKernel": "db", "Region": "db",
         "Snapshot": "db", "RecordSettings": "launcher",
         "run_recorded": "launcher", "merge_databases": "merge", "MergeResult": "merge",
         "compact_database": "compact", "CompactResult": "compact"}


def __getattr__(name: str):
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"mneme_cc.record.{_HOME[name]}"), name)
    raise AttributeError(name)
