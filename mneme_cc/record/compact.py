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
from mneme_cc.record.db import RecordDB, refuse_links_out
from mneme_cc.record.snapshot import native

_CHUNK_NAME = re.compile(r"[0-9a-f]{32}")


@dataclass
class CompactResult:
    chunks: int = 0          # chunk files looked at
    compacted: int = 0       # rewritten smaller
    bytes_before: int = 0    # the chunk files' sizes, summed
    bytes_after: int = 0
    failed: list[str] = field(default_factory=list)  # what could not be compacted, and why


def chunk_names(path: Path) -> list[str]:
    """The chunks a database stores: regular files under chunk names (a
    writer's temporaries, links, FIFOs and directories left out)."""
    root = path / "chunks"
    if not root.is_dir():
        return []
    names = []
    for shard in os.scandir(root):
        if not shard.is_dir(follow_symlinks=False):
            continue
        with os.scandir(shard.path) as entries:
            names += [e.name for e in entries if _CHUNK_NAME.fullmatch(e.name)
                      and e.name[:2] == shard.name and e.is_file(follow_symlinks=False)]
    return sorted(names)


def compact_database(path: str | Path, level: int = 3, jobs: int | None = None) -> CompactResult:
    """Compresses at `level` every chunk of the database at `path` stored raw."""
    if not (-100 <= level <= 19) or level == 0:
        raise UsageError(f"--zstd-level {level}: compacting compresses, so give a zstd level "
                         "from 1 to 19 (or a fast one, -1 to -100)")
    db = RecordDB(path)
    refuse_links_out(db.path)
    result = CompactResult()
    names = chunk_names(db.path)

    def one(name: str) -> tuple[int, int, str | None]:
        try:
            return (*native().compact_chunk(str(db.path), name, level), None)
        except (ValueError, MemoryError) as exc:
            return 0, 0, str(exc) or type(exc).__name__

    with ThreadPoolExecutor(jobs or min(32, len(os.sched_getaffinity(0)))) as pool:
        for before, after, error in pool.map(one, names):
            result.chunks += 1
            if error:
                result.failed.append(error)
                continue
            result.bytes_before += before
            result.bytes_after += after
            result.compacted += after < before
    return result

