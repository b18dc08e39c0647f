"""Compacting a record database: chunks stored uncompressed, those a
recording's exit wrote without waiting for zstd (or all of them, recorded
with `--zstd-level 0`), compressed in place.

Each chunk is read back verified, compressed, and replaced through a rename,
so a reader (a replay, a tuning study, a recorder adding to the database)
sees the raw file or the compressed one, never part of either; an
interrupted compaction leaves a complete database and can be run again.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mneme_cc.errors import UsageError
from mneme_cc.record.db import RecordDB
from mneme_cc.record.snapshot import native

_CHUNK_NAME = re.compile(r"[0-9a-f]{32}")


@dataclass
class CompactResult:
    chunks: int = 0          # chunk files looked at
    compacted: int = 0       # rewritten smaller
    bytes_before: int = 0    # the chunk files' sizes, summed
    bytes_after: int = 0
    damaged: list[str] = field(default_factory=list)  # what could not be read, and why


def chunk_names(path: Path) -> list[str]:
    """The chunks a database stores (temporaries of a writer at work left out)."""
    root = path / "chunks"
    if not root.is_dir():
        return []
    return sorted(entry.name for shard in root.iterdir() if shard.is_dir()
                  for entry in shard.iterdir()
                  if _CHUNK_NAME.fullmatch(entry.name) and entry.name[:2] == shard.name
                  and not entry.is_symlink())


def compact_database(path: str | Path, level: int = 3, jobs: int | None = None) -> CompactResult:
    """Compresses at `level` every chunk of the database at `path` stored raw."""
    if not (-100 <= level <= 19) or level == 0:
        raise UsageError(f"--zstd-level {level}: compacting compresses, so give a zstd level "
                         "from 1 to 19 (or a fast one, -1 to -100)")
    db = RecordDB(path)
    result = CompactResult()
    names = chunk_names(db.path)

    def one(name: str) -> tuple[int, int, str | None]:
        try:
            return (*native().compact_chunk(str(db.path), name, level), None)
        except ValueError as exc:
            return 0, 0, str(exc)

    with ThreadPoolExecutor(jobs or min(32, os.cpu_count() or 1)) as pool:
        for before, after, error in pool.map(one, names):
            result.chunks += 1
            if error:
                result.damaged.append(error)
                continue
            result.bytes_before += before
            result.bytes_after += after
            result.compacted += after < before
    return result

