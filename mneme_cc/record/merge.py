"""Merging record databases: instances recorded apart (one per node on
node-local disk, say) gathered into one database, as if recorded there.

Each instance of a source that the target lacks is copied in the order the
recorder commits one (docs/record-db.md): its chunks, its kernel's files,
its prologue and epilogue, and last its index entry, so an interrupted merge
leaves a target that lists only complete instances and can be run again.
Chunks are read back verified and stored once; an instance the target has
already (same kernel code and launch) is left alone. Merge into a database
no recorder is writing at the same time (docs/cluster.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mneme_cc.errors import RecordDBError
from mneme_cc.record.db import RecordDB, refuse_links_out
from mneme_cc.record.snapshot import IMAGE_STATE, Snapshot, native, regular_file


@dataclass
class MergeResult:
    copied: int = 0          # instances added to the target
    present: int = 0         # instances the target had already
    chunks: int = 0          # chunks written (the rest were there)


def _chunk_path(db: Path, digest: str) -> Path:
    return db / "chunks" / digest[:2] / digest


def _put(path: Path, data: bytes, keep_first: bool = True) -> None:
    """Written whole. A file that is the same by construction (a kernel's):
    whoever came first keeps it; an instance's states replace what a
    recording cut short may have left."""
    native().write_file_atomic(str(path), data, keep_first)


def _file_name(name: object, where: Path) -> str:
    """A file the database names (`where`, a file at its top, names it): a
    plain name inside it, never a path or a link."""
    if not isinstance(name, str) or not name or Path(name).name != name or name in (".", ".."):
        raise RecordDBError(f"{where}: names {name!r}, not a file of the database")
    if (where.parent / name).is_symlink():
        raise RecordDBError(f"{where}: {name} is a symbolic link, not a file of the database")
    return name


def _snapshots(db: RecordDB, inst) -> list[Snapshot]:
    """What an instance's chunks are listed in, its kernel's image included."""
    found = [inst.prologue, inst.epilogue]
    kernel = db.kernel(inst.static_hash)
    image = kernel.description.get("image")
    if image:
        found.append(Snapshot(db, db.path / _file_name(image["file"], kernel.path),
                              kind=IMAGE_STATE))
    return found


def merge_databases(target: str | Path, source: str | Path, level: int = 3) -> MergeResult:
    """Copies into `target` (created if missing) every instance of `source` it lacks."""
    target, source = Path(target), Path(source)
    if target.resolve() == source.resolve():
        raise RecordDBError(f"{source}: merging a database into itself")
    src = RecordDB(source)
    if target.is_dir() and any(target.iterdir()) and not (target / "database.json").exists():
        raise RecordDBError(f"{target} is not empty and is not a record database: choose "
                            "another -rdb directory")
    if (target / "database.json").exists():
        RecordDB(target)  # of a format this mneme-cc writes, before anything is made in it
    try:
        native().init_database(str(target))
    except ValueError as exc:
        raise RecordDBError(f"{target}: {exc}") from None
    RecordDB(target)  # the target's format is one this mneme-cc writes
    refuse_links_out(target)
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
        shared = [kernel.path.name] + [kernel.description[k]["file"] for k in ("ir", "image")
                                       if kernel.description.get(k)]
        states = [inst.entry["prologue"], inst.entry["epilogue"]]
        for file in shared + states:
            file = _file_name(file, kernel.path)
            try:
                data = regular_file(source / file).read_bytes()
            except OSError as exc:
                raise RecordDBError(f"{source / file}: {exc.strerror} (the database is "
                                    "incomplete)") from None
            _put(target / file, data, keep_first=file not in states)
        _put(target / "index" / name, inst.path.read_bytes(), keep_first=False)
        result.copied += 1
    return result
