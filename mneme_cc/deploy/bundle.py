"""A bundle: every tuned kernel's verified winner as a deployable unit.

    DIR/manifest.json     format "mneme-bundle", version 1, one entry per kernel
                          and recorded launch shape (docs/deploy.md)
    DIR/<name>.cubin      the winner compiled for the GPU it was tuned on

An entry is keyed by the kernel's mangled symbol, the GPU arch, the SHA-256
of the kernel's recorded IR and the recorded launch shape; it says how to
serve a matching launch (the tuned geometry and dynamic shared memory), with
the full ReplayConfig, its verification outcome and speedup. A bundle is
untrusted input when read: every field is checked, every cubin must be a
plain file of the bundle whose digest matches.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mneme_cc.errors import MnemeError, UsageError
from mneme_cc.fileio import regular_text, write_text_atomic

FORMAT, VERSION = "mneme-bundle", 1
MANIFEST = "manifest.json"
Dim3 = tuple[int, int, int]
_SYMBOL = re.compile(r"[A-Za-z_.$][A-Za-z0-9_.$]*")
_ARCH = re.compile(r"sm_[0-9]+[a-z]?")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class BundleEntry:
    kernel: str                 # mangled symbol
    demangled: str
    arch: str                   # "sm_90"
    ir_sha256: str              # of the recorded IR ("" for a kernel without IR)
    launch: dict[str, Any]      # the recorded shape: grid, block, shared_mem_bytes
    serve: dict[str, Any]       # how a matching launch runs: grid, block, shared_mem_bytes
    cubin: str                  # file name in the bundle
    cubin_sha256: str
    config: dict[str, Any]
    outcome: str
    median_ms: float
    baseline_ms: float | None
    speedup: float | None
    instance: str
    device: str
    # The specialised arguments' recorded bytes: the cubin computes only for them.
    specialized_args: list[dict[str, Any]] = field(default_factory=list)
    # A kernel without IR: SHA-256 of the application's image it was tuned from.
    image_sha256: str = ""

    @property
    def code_sha256(self) -> str:
        """The digest a launch's kernel must match: its IR's or its image's."""
        return self.image_sha256 or self.ir_sha256

    def shape(self) -> tuple[Dim3, Dim3, int]:
        return (tuple(self.launch["grid"]), tuple(self.launch["block"]),
                self.launch["shared_mem_bytes"])


#: What a launch can carry, and so what the serving runtime accepts.
MAX_DIM, MAX_SHARED_MEM = 2**31 - 1, 2**31 - 1


def _dims(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 3 and all(
        isinstance(d, int) and not isinstance(d, bool) and 0 < d <= MAX_DIM for d in value)


def _shape_ok(shape: Any) -> bool:
    smem = shape.get("shared_mem_bytes") if isinstance(shape, dict) else None
    return isinstance(shape, dict) and _dims(shape.get("grid")) and _dims(shape.get("block")) \
        and isinstance(smem, int) and not isinstance(smem, bool) and 0 <= smem <= MAX_SHARED_MEM


class Bundle:
    def __init__(self, path: Path, entries: list[BundleEntry]):
        self.path, self.entries = path, entries

    def cubin(self, entry: BundleEntry) -> bytes:
        """The entry's cubin, checked against its digest."""
        path = self.path / entry.cubin
        if path.exists() and not path.is_file():  # a FIFO or a device would block or lie
            raise UsageError(f"{path}: not a regular file; the bundle is damaged: export it "
                             "again")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"{path}: cannot be read ({exc.strerror}); the bundle is "
                             "incomplete: export it again") from None
        if hashlib.sha256(data).hexdigest() != entry.cubin_sha256:
            raise UsageError(f"{path}: does not match its digest in {MANIFEST}; the bundle is "
                             "damaged: export it again")
        return data

    def match(self, kernel: str, arch: str, ir_sha256: str, grid: Dim3, block: Dim3,
              shared_mem_bytes: int, nearest: bool = False) -> tuple[BundleEntry | None, str]:
        """The entry that serves this launch, or None and why the launch passes through.
        Exact: same kernel, arch, code (`ir_sha256`: the IR's digest, or the
        image's for a kernel without IR) and launch shape. `nearest`: the same kernel, arch
        and IR at the recorded shape closest in threads and blocks."""
        mine = [e for e in self.entries if e.kernel == kernel]
        if not mine:
            return None, "not tuned"
        archs = sorted({e.arch for e in mine})
        if not (mine := [e for e in mine if e.arch == arch]):
            return None, f"tuned for another GPU ({', '.join(archs)}, not {arch})"
        if not (same := [e for e in mine if e.code_sha256 == ir_sha256]):
            if any(e.image_sha256 for e in mine):
                return None, "the kernel's image changed since it was tuned (record and tune again)"
            return None, "the kernel's IR changed since it was tuned (rebuild, record, tune again)"
        mine = same
        shape = (tuple(grid), tuple(block), shared_mem_bytes)
        for entry in mine:
            if entry.shape() == shape:
                return entry, "tuned for this launch shape"
        if not nearest:
            return None, "no entry for this launch shape (--match nearest serves the closest)"

        def distance(entry: BundleEntry) -> tuple[float, float]:
            g, b, _ = entry.shape()
            return (abs(math.log(math.prod(b) / math.prod(block))),
                    abs(math.log(math.prod(g) / math.prod(grid))))

        return min(mine, key=distance), "the nearest recorded launch shape"


def _specialized_ok(args: Any) -> bool:
    def ok(arg: Any) -> bool:
        index, data = arg.get("index"), arg.get("hex")
        return isinstance(index, int) and not isinstance(index, bool) and 0 <= index <= 4096 \
            and isinstance(data, str) and bool(data) and len(data) % 2 == 0 \
            and re.fullmatch(r"[0-9a-f]*", data) is not None

    return isinstance(args, list) and all(isinstance(a, dict) and ok(a) for a in args)


def _entry(raw: Any, where: Path, path: Path) -> BundleEntry:
    try:
        entry = BundleEntry(**raw)
    except TypeError as exc:
        raise UsageError(f"{where}: an entry is malformed ({exc}); export the bundle again") \
            from None
    digest = "image_sha256" if entry.image_sha256 else "ir_sha256"
    text = {"kernel": entry.kernel, "demangled": entry.demangled, "arch": entry.arch,
            digest: entry.code_sha256, "cubin": entry.cubin,
            "cubin_sha256": entry.cubin_sha256, "outcome": entry.outcome}
    bad = [k for k, v in text.items() if not isinstance(v, str) or not v]
    # Names and digests the serving runtime reads back from a line-based table.
    for key, pattern in (("kernel", _SYMBOL), ("arch", _ARCH), (digest, _SHA256)):
        if key not in bad and not pattern.fullmatch(text[key]):
            bad.append(key)
    if not _specialized_ok(entry.specialized_args):
        bad.append("specialized_args")
    if not _shape_ok(entry.launch) or not _shape_ok(entry.serve):
        bad.append("launch/serve")
    wanted = entry.config.get("specialize_args", []) if isinstance(entry.config, dict) else None
    if not isinstance(wanted, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in wanted):
        bad.append("config")
    if "cubin" not in bad and ("/" in entry.cubin or "\\" in entry.cubin or entry.cubin in (
            ".", "..") or "\0" in entry.cubin or (path / entry.cubin).is_symlink()):
        bad.append(f"cubin {entry.cubin!r} is not a file of the bundle")
    if bad:
        raise UsageError(f"{where}: the entry for {entry.kernel!r} has bad fields: "
                         f"{', '.join(bad)}; export the bundle again")
    return entry


def load_bundle(path: str | Path) -> Bundle:
    path = Path(path)
    where = path / MANIFEST
    try:
        raw = json.loads(regular_text(where, "a bundle's manifest"))
    except FileNotFoundError:
        raise UsageError(f"{path}: not a bundle (no {MANIFEST}); write one with "
                         "`mneme export --bundle DIR`") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{where}: unreadable ({exc}); export the bundle again") from None
    except RecursionError:
        raise UsageError(f"{where}: nested too deeply to be a manifest; export the bundle "
                         "again") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != VERSION:
        raise UsageError(f"{where}: not a {FORMAT} version {VERSION} manifest")
    if not isinstance(raw.get("kernels"), list):
        raise UsageError(f"{where}: 'kernels' is not a list")
    return Bundle(path, [_entry(e, where, path) for e in raw["kernels"]])


def write_bundle(path: Path, chosen: list[tuple[dict[str, Any], Any, Any]], arch_of,
                 step=lambda: None) -> list:
    """Writes the bundle for the chosen (best record, ReplayConfig, instance) triples;
    `arch_of(record)` is the GPU arch to compile for, `step()` is called after each
    winner. Returns the entries."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path}: exists and is not a directory")
    made = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    try:
        return _write_entries(path, chosen, arch_of, step)
    except BaseException:
        if made:  # a bundle that failed leaves no directory it made behind
            shutil.rmtree(path, ignore_errors=True)
        raise


def _write_entries(path: Path, chosen, arch_of, step) -> list:
    from mneme_cc.replay.compiling.compiler import compile_instance

    entries = []
    for record, config, inst in chosen:
        kernel = inst.db.kernel(inst.static_hash)
        # Matched by its image without IR; run as it is for an `original` winner.
        needs_image = not kernel.has_ir or config.baseline == "original"
        image = kernel.image() if needs_image else None
        if needs_image and image is None:
            raise UsageError(f"{inst.demangled}: the application's image, which the bundle "
                             "needs, was not recorded")
        arch = arch_of(record)
        if config.baseline == "original":  # machine code only: its image, in a new geometry
            compiled, cubin = None, image
        else:
            try:
                compiled = compile_instance(inst, config, arch)
            except MnemeError as exc:
                raise UsageError(f"{inst.demangled}: the winner does not compile here: {exc}") \
                    from None
            cubin = compiled.cubin
        tuned_with = record.get("assembler")
        if compiled and isinstance(tuned_with, str) and tuned_with != compiled.assembler:
            print(f"mneme export: warning: {inst.demangled} was tuned with {tuned_with}; its "
                  f"bundled cubin is assembled by {compiled.assembler} (set MNEME_PTXAS to "
                  "export with the same ptxas)", file=sys.stderr)
        shape = json.dumps(record["launch"], sort_keys=True).encode()
        name = f"{inst.static_hash}-{hashlib.sha256(shape).hexdigest()[:12]}.cubin"
        (path / name).write_bytes(cubin)
        launch = record["launch"]
        serve = {"grid": list(config.grid or launch["grid"]),
                 "block": list(config.block or launch["block"]),
                 "shared_mem_bytes": config.shared_mem_bytes
                 if config.shared_mem_bytes is not None else launch["shared_mem_bytes"]}
        entries.append(BundleEntry(
            kernel=inst.kernel_name, demangled=inst.demangled, arch=arch,
            ir_sha256=hashlib.sha256(kernel.bitcode()).hexdigest() if kernel.has_ir else "",
            image_sha256="" if kernel.has_ir else hashlib.sha256(image).hexdigest(),
            launch=launch, serve=serve,
            cubin=name, cubin_sha256=hashlib.sha256(cubin).hexdigest(),
            config=config.to_dict(), outcome=record.get("outcome", "verified"),
            median_ms=record["median_ms"], baseline_ms=record.get("baseline_ms"),
            speedup=record.get("speedup"), instance=inst.name,
            device=str(record.get("device")),
            specialized_args=[{"index": i, "hex": inst.arg(i).hex()}
                              for i in config.specialize_args]))
        step()
    write_text_atomic(path / MANIFEST, json.dumps(
        {"format": FORMAT, "version": VERSION, "kernels": [asdict(e) for e in entries]},
        indent=2) + "\n")
    return entries
