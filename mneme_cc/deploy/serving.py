"""The serving table: what `mneme run --tuned` hands the runtime (MNEME_SERVE).

Python checks the bundle (manifest, every cubin against its digest) and
copies the verified cubins into a private directory, so the runtime loads
exactly the bytes that were checked; the runtime then matches launches
itself: the GPU's arch, the SHA-256 of the IR the application registers
(the digest `mneme export` took of the recorded IR; for a kernel without
IR, `image:` and that of the image its code came from) and the launch
shape.
The file is tab-separated lines (docs/deploy.md):

    mneme-serve <TAB> 1
    nearest <TAB> 0|1              serve the nearest recorded shape
    time-all <TAB> 0|1             time every launch, not only tuned kernels'
    report <TAB> DIR               where each process writes its report
    entry <TAB> KERNEL ARCH IR_SHA256|image:IMAGE_SHA256 GRID BLOCK SMEM SERVE_GRID SERVE_BLOCK
          SERVE_SMEM CUBIN SPECIALIZE_DIMS ARGS
             (dims as X,Y,Z; CUBIN a path, or "!" and why the entry cannot
              serve; ARGS "-" or INDEX:HEX;INDEX:HEX, the specialised arguments)
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mneme_cc.deploy.bundle import Bundle, BundleEntry, Dim3
from mneme_cc.errors import UsageError
from mneme_cc.replay.config import MAX_GRID

TABLE = "serving-table.tsv"


@dataclass
class ServingTable:
    path: Path                  # the table file
    directory: Path             # private: the table, the cubins, the reports
    warnings: list[str] = field(default_factory=list)

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _dims(dims) -> str:
    return ",".join(str(int(d)) for d in dims)


def entry_shape(entry: BundleEntry) -> str:
    """`grid 64x1x1 block 256x1x1 smem 0`: how warnings name an entry."""
    launch = entry.launch
    return (f"grid {'x'.join(map(str, launch['grid']))} block "
            f"{'x'.join(map(str, launch['block']))} smem {launch['shared_mem_bytes']}")


def _unservable(entry: BundleEntry) -> str | None:
    """Why an entry that loaded cannot serve, before its cubin is looked at."""
    wanted = entry.config.get("specialize_args") or []
    recorded = {a["index"] for a in entry.specialized_args}
    if not isinstance(wanted, list) or not set(wanted) <= recorded:
        return ("it is specialised on argument values the bundle does not record "
                "(export the bundle again)")
    return None


def _entry_line(entry: BundleEntry, cubin: str) -> str:
    launch, serve = entry.launch, entry.serve
    args = ";".join(f"{a['index']}:{a['hex']}" for a in entry.specialized_args) or "-"
    code = f"image:{entry.image_sha256}" if entry.image_sha256 else entry.ir_sha256
    fields = ["entry", entry.kernel, entry.arch, code,
              _dims(launch["grid"]), _dims(launch["block"]), str(launch["shared_mem_bytes"]),
              _dims(serve["grid"]), _dims(serve["block"]), str(serve["shared_mem_bytes"]),
              cubin, "1" if entry.config.get("specialize_dims") else "0", args]
    return "\t".join(fields)


def write_table(bundle: Bundle, *, nearest: bool = False, time_all: bool = False,
                directory: Path | None = None) -> ServingTable:
    """Checks every entry's cubin and writes the table into a new private
    directory. An entry whose cubin is missing or damaged stays in the table
    marked unservable, with a one-line warning naming the file.

    Raises:
        UsageError: the private directory or the table cannot be written.
    """
    import tempfile

    try:
        where = Path(tempfile.mkdtemp(prefix="mneme-run-", dir=directory))  # mode 0700
    except OSError as exc:
        raise UsageError(f"cannot make a private directory for the serving table: "
                         f"{exc.strerror}") from None
    table = ServingTable(where / TABLE, where)
    try:
        if any(c in str(where) for c in "\t\n\r"):
            raise UsageError(f"{where}: a temporary directory whose name has a tab or a "
                             "newline: set TMPDIR to another")
        (where / "cubins").mkdir()
        lines = ["mneme-serve\t1", f"nearest\t{int(nearest)}", f"time-all\t{int(time_all)}",
                 f"report\t{where}"]
        lines += [_table_line(table, bundle, n, entry) for n, entry in enumerate(bundle.entries)]
        table.path.write_text("\n".join(lines) + "\n")
    except OSError as exc:
        table.close()
        raise UsageError(f"{where}: the serving table cannot be written ({exc.strerror})") \
            from None
    except BaseException:
        table.close()
        raise
    return table


def _table_line(table: ServingTable, bundle: Bundle, n: int, entry: BundleEntry) -> str:
    """Entry n's line; its checked cubin copied into the table's directory, or
    the line marked unservable and a warning added."""
    why = _unservable(entry)
    if why is None:
        try:
            data = bundle.cubin(entry)
        except UsageError as exc:
            why = f"its cubin is missing or damaged ({exc})"
    if why is not None:
        table.warnings.append(f"{entry.demangled} at {entry_shape(entry)}: {why}; "
                              "its launches pass through")
        return _entry_line(entry, "!" + why.replace("\t", " ").replace("\n", " "))
    copy = table.directory / "cubins" / f"{n}.cubin"
    fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return _entry_line(entry, str(copy))


def serve_shape(entry: BundleEntry, grid: Dim3, block: Dim3, shared_mem_bytes: int,
                exact: bool) -> tuple[tuple[Dim3, Dim3, int] | None, str]:
    """The geometry a launch is served with by `entry` (which `Bundle.match`
    chose), or None and why not. An exact match runs the tuned geometry. A
    nearest one keeps the launch's own shape, with the tuned block when the
    tuning kept the recorded threads per dimension and that block divides the
    launch's threads, and the tuned shared memory when the launch asks for
    the recorded amount. The runtime (ServeTable.cpp) applies the same rules."""
    serve = entry.serve
    if exact:
        return (tuple(serve["grid"]), tuple(serve["block"]), serve["shared_mem_bytes"]), \
            "tuned for this launch shape"
    if entry.config.get("specialize_dims"):
        return None, "the nearest entry is specialised on its own launch shape"
    rec_grid, rec_block, rec_smem = entry.shape()
    out_grid, out_block, out_smem = tuple(grid), tuple(block), shared_mem_bytes
    if tuple(serve["block"]) != rec_block:
        dims = []
        for g, b, rg, rb, sg, sb, most in zip(grid, block, rec_grid, rec_block, serve["grid"],
                                              serve["block"], MAX_GRID, strict=True):
            threads = g * b
            if sg * sb != rg * rb or threads % sb or threads // sb > most:
                return None, "the tuned geometry does not carry over to this launch shape"
            dims.append(threads // sb)
        out_grid, out_block = tuple(dims), tuple(serve["block"])
    if serve["shared_mem_bytes"] != rec_smem:
        if shared_mem_bytes != rec_smem:
            return None, "the tuned shared memory does not carry over to this launch shape"
        out_smem = serve["shared_mem_bytes"]
    return (out_grid, out_block, out_smem), "the nearest recorded launch shape"
