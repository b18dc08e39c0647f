"""Merging record databases: instances recorded apart (one per node on
node-local disk, say) gathered into one database, as if recorded there.

Each instance of a source that the target lacks is copied in the order the
recorder commits one (docs/record-db.md): its chunks, its kernel's files,
its prologue and epilogue, and last its index entry, so an interrupted merge
leaves a target that lists only complete instances and can be run again.
Chunks are read back verified and stored once; an instance the target has
already (same kernel code and launch) is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mneme_cc.errors import RecordDBError
from mneme_cc.record.db import RecordDB
from mneme_cc.record.snapshot import Snapshot, native


@dataclass
class MergeResult:
    copied: int = 0          # instances added to the target
    present: int = 0         # instances the target had already
    chunks: int = 0          # chunks written (the rest were there)


def _chunk_path(db: Path, digest: str) -> Path:
    return db / "chunks" / digest[:2] / digest


def _put(path: Path, data: bytes) -> None:
    """A file that is the same by construction: whoever came first keeps it."""
    native().write_file_atomic(str(path), data, True)


def _file_name(name: object, where: Path) -> str:
    """A file the database names: a plain name inside it, never a path."""
    if not isinstance(name, str) or not name or Path(name).name != name or name in (".", ".."):
        raise RecordDBError(f"{where}: names {name!r}, not a file of the database")
    return name


def _snapshots(db: RecordDB, inst) -> list[Snapshot]:
    """What an instance's chunks are listed in, its kernel's image included."""
    found = [inst.prologue, inst.epilogue]
    image = db.kernel(inst.static_hash).description.get("image")
    if image:
        found.append(Snapshot(db, db.path / _file_name(image["file"], inst.path)))
    return found


def merge_databases(target: str | Path, source: str | Path, level: int = 3) -> MergeResult:
    """Copies into `target` (created if missing) every instance of `source` it lacks."""
    target, source = Path(target), Path(source)
    if target.resolve() == source.resolve():
        raise RecordDBError(f"{source}: merging a database into itself")
    src = RecordDB(source)
    try:
        native().init_database(str(target))
    except ValueError as exc:
        raise RecordDBError(f"{target}: {exc}") from None
    RecordDB(target)  # the target's format is one this mneme-cc writes
    result = MergeResult()
    for inst in src.instances:
        name = inst.path.name
        if (target / "index" / name).exists():
            result.present += 1
            continue
        for snapshot in _snapshots(src, inst):
            for region in snapshot.regions:
                for digest in region.chunks.values():
                    if _chunk_path(target, digest).exists():
                        continue
                    stored, _ = native().write_chunk(str(target), src.read_chunk(digest), level)
                    if stored != digest:
                        raise RecordDBError(f"{source}: chunk {digest} reads back as {stored}")
                    result.chunks += 1
        kernel = src.kernel(inst.static_hash)
        files = [kernel.path.name] + [kernel.description[k]["file"] for k in ("ir", "image")
                                      if kernel.description.get(k)]
        files += [inst.entry["prologue"], inst.entry["epilogue"]]
        for file in files:
            file = _file_name(file, kernel.path)
            try:
                data = (source / file).read_bytes()
            except OSError as exc:
                raise RecordDBError(f"{source / file}: {exc.strerror} (the database is "
                                    "incomplete)") from None
            _put(target / file, data)
        _put(target / "index" / name, inst.path.read_bytes())
        result.copied += 1
    return result
