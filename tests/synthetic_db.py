"""Writes a record database the way the recorder does, for CPU-only tests.

The recorder (C++) is exercised on the GPU tier; here the same on-disk
layout (docs/record-db.md) is produced through the shared format code in
mneme_cc._native, so RecordDB, `mneme ls` and `mneme show` can be tested
anywhere.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from mneme_cc import _native

CHUNK = 4096
PROLOGUE, EPILOGUE, IMAGE = 1, 2, 3


def chunk_codec(db: Path, name: str) -> int:
    """How a chunk file is stored: 0 raw, 1 zstd (its header's codec field)."""
    return int.from_bytes((db / "chunks" / name[:2] / name).read_bytes()[12:16], "little")


def _chunks(db: Path, data: bytes) -> list[tuple[int, str]]:
    refs = []
    for index in range(0, max(1, (len(data) + CHUNK - 1) // CHUNK)):
        piece = data[index * CHUNK:(index + 1) * CHUNK]
        digest, _ = _native.write_chunk(str(db), piece, 1)
        refs.append((index, digest))
    return refs if data else []


def make_database(db: Path, a: np.ndarray, b: np.ndarray, out_after: np.ndarray,
                  bitcode: bytes | None = None,
                  kernel: tuple[str, str] = ("_Z3addPKfS0_Pfi",
                                             "add(float const*, float const*, float*, int)"),
                  image: bytes | None = None, dynamic: str = "8899aabbccddeeff",
                  grid: tuple[int, int, int] = (4, 1, 1),
                  block: tuple[int, int, int] = (256, 1, 1)) -> dict:
    """One kernel `add(float const*, float const*, float*, int)`, one instance:
    allocations a, b and out (zeros before, out_after after). `bitcode` and
    `kernel` (mangled, demangled) give a real module of that signature instead;
    `image` (PTX, a cubin or a fatbinary) makes it a kernel without IR, as an
    nvcc build or a module loaded at run time records."""
    _native.init_database(str(db))
    base = 0x200000000000
    out_before = np.zeros_like(out_after)
    allocs = [(base, a.tobytes()), (base + 0x200000, b.tobytes()), (base + 0x400000,
                                                                     out_before.tobytes())]
    n = len(a)
    args = np.array([base, base + 0x200000, base + 0x400000], np.uint64).tobytes() + \
        np.array([n, 0], np.int32).tobytes()
    static = "00112233445566aa"
    entry = {
        "format": "mneme-instance", "version": 1, "kernel": kernel[0],
        "demangled": kernel[1],
        "static_hash": static, "dynamic_hash": dynamic, "has_ir": image is None,
        "launch": {"api": "cudaLaunchKernel", "grid": list(grid), "block": list(block),
                   "cluster": None, "shared_mem_bytes": 0, "cooperative": False,
                   "stream_flags": 0, "default_stream": True},
        "params": [{"offset": 0, "size": 8}, {"offset": 8, "size": 8},
                   {"offset": 16, "size": 8}, {"offset": 24, "size": 4}],
        "args_hex": args[:28].hex(), "launch_index": 1, "in_app_ms": 0.25,
        "replayable": True, "reasons": [],
        "window": {"base": base, "size": 1 << 34, "granularity": 1 << 21},
        "device": {"ordinal": 0, "name": "Test GPU", "arch": "sm_90"},
        "process": {"pid": 1, "rank": -1, "host": "test"},
        "recorded_at": "2026-11-22T00:00:00Z",
        "prologue": f"DeviceState.prologue.{static}.{dynamic}.mneme",
        "epilogue": f"DeviceState.epilogue.{static}.{dynamic}.mneme",
        "raw_bytes": sum(len(d) for _, d in allocs) + 28, "changed_bytes": len(out_after) * 4,
    }
    prologue = {"kind": PROLOGUE, "chunk_size": CHUNK, "metadata": json.dumps(entry),
                "regions": [{"kind": 0, "name": "", "address": addr, "size": len(data),
                             "chunks": _chunks(db, data)} for addr, data in allocs]
                + [{"kind": 2, "name": "arguments", "address": 0, "size": 28,
                    "chunks": _chunks(db, args[:28])}]}
    after = out_after.tobytes()
    changed = [(i, d) for (i, d), (_, old)
               in zip(_chunks(db, after), prologue["regions"][2]["chunks"], strict=True) if d != old]
    epilogue = {"kind": EPILOGUE, "chunk_size": CHUNK, "metadata": json.dumps(entry),
                "regions": [{**r, "chunks": []} for r in prologue["regions"][:2]]
                + [{**prologue["regions"][2], "chunks": changed}]}
    (db / entry["prologue"]).write_bytes(_native.encode_state(prologue))
    (db / entry["epilogue"]).write_bytes(_native.encode_state(epilogue))
    bitcode = bitcode or b"BC\xc0\xde" + bytes(60)
    (db / f"RecordedIR_{static}.bc").write_bytes(bitcode)
    kernel = {"format": "mneme-kernel", "version": 1, "static_hash": static,
              "name": entry["kernel"], "demangled": entry["demangled"], "has_ir": True,
              "ir": {"file": f"RecordedIR_{static}.bc", "bytes": len(bitcode),
                     "content_hash": _native.content_hash(bitcode),
                     "metadata": {"arch": "sm_90", "kernels": [{"name": entry["kernel"]}],
                                  "codegen": {"opt_level": "3", "fp_contract": "fast"}}},
              "image": None, "params": entry["params"], "globals": []}
    if image is not None:
        state = {"kind": IMAGE, "chunk_size": CHUNK, "metadata": "",
                 "regions": [{"kind": 3, "name": "image", "address": 0, "size": len(image),
                              "chunks": _chunks(db, image)}]}
        (db / f"Image.{static}.mneme").write_bytes(_native.encode_state(state))
        kernel.update(has_ir=False, ir=None,
                      image={"file": f"Image.{static}.mneme", "bytes": len(image)})
    (db / f"{static}.json").write_text(json.dumps(kernel))
    stored = sum(f.stat().st_size for f in (db / "chunks").rglob("*") if f.is_file())
    (db / "index" / f"{static}.{dynamic}.json").write_text(json.dumps({**entry,
                                                                     "stored_bytes": stored}))
    return entry


ADD = "_Z3addPKfS0_Pfi"
#: PTX defining the database's kernel, as an application could load it.
PTX = f"""//
.version 9.0
.target sm_90
.address_size 64

.visible .entry {ADD}(
\t.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u32 p3
)
{{
\tret;
}}
""".encode() + b"\0"


def cubin_image() -> bytes:
    """A minimal CUDA ELF defining the kernel as an entry (what cubin_kernels reads)."""
    strtab = b"\0" + ADD.encode() + b"\0"
    shstr = b"\0.strtab\0.symtab\0.shstrtab\0"
    sym = bytes(24) + struct.pack("<IBBHQQ", 1, 0x12, 0x10, 0, 0, 0)  # STT_FUNC, entry
    body = strtab + shstr + sym
    shoff = 64 + len(body)
    sections = [bytes(64),
                struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, 64, len(strtab), 0, 0, 1, 0),
                struct.pack("<IIQQQQIIQQ", 9, 2, 0, 0, 64 + len(strtab) + len(shstr), len(sym),
                            1, 1, 8, 24),
                struct.pack("<IIQQQQIIQQ", 17, 3, 0, 0, 64 + len(strtab), len(shstr), 0, 0, 1,
                            0)]
    header = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack(
        "<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, 90 << 8, 64, 0, 0, 64, len(sections), 3)
    return header + body + b"".join(sections)
