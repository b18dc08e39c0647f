"""The device IR a recordable binary carries (see docs/embedded-ir.md).

The records are decoded by the same C++ code the plugin writes them with
(`mneme_cc._native`); this module finds them in files and gives them names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from mneme_cc.drivers.elf import elf_members, section_names_and_data
from mneme_cc.errors import BinaryFormatError

SECTION = ".mneme_ir"


@dataclass(frozen=True)
class EmbeddedKernel:
    name: str  # mangled: what CUDA registers and Proteus keys on
    demangled: str


@dataclass(frozen=True)
class DeviceGlobal:
    name: str
    demangled: str
    size: int
    space: str  # "global" (__device__) or "constant" (__constant__)
    constant: bool  # read-only in the IR


@dataclass(frozen=True)
class EmbeddedModule:
    """One translation unit's device module for one GPU arch, or the module
    linked from several (relocatable device code)."""

    origin: str  # the file (or archive member) it was found in
    arch: str
    source: str
    triple: str
    target_features: str
    kernels: tuple[EmbeddedKernel, ...]
    globals: tuple[DeviceGlobal, ...]
    producer: str
    bitcode: bytes = field(repr=False)
    metadata: dict = field(repr=False, compare=False)

    @property
    def ir_bytes(self) -> int:
        return len(self.bitcode)

    @property
    def linked(self) -> bool:
        """True for the module a link of relocatable device code made from
        several TUs' modules (`linked_sources` names them)."""
        return bool(self.metadata.get("linked"))


def decode_records(data: bytes, origin: str) -> list[EmbeddedModule]:
    """Decodes a `.mneme_ir` section's bytes.

    Raises:
        BinaryFormatError: a record is truncated, corrupt or of another version.
    """
    from mneme_cc import _native

    try:
        records = _native.decode_embedded_ir(data)
    except ValueError as exc:
        raise BinaryFormatError(f"{origin}: {exc}") from None
    modules = []
    for record in records:
        try:
            meta = json.loads(record["metadata"])
            modules.append(EmbeddedModule(
                origin=origin,
                arch=meta["arch"],
                source=meta["source"],
                triple=meta["triple"],
                target_features=meta.get("target_features", ""),
                kernels=tuple(EmbeddedKernel(k["name"], k["demangled"]) for k in meta["kernels"]),
                globals=tuple(DeviceGlobal(g["name"], g["demangled"], int(g["size"]),
                                           g["space"], bool(g["constant"]))
                              for g in meta["globals"]),
                producer=meta.get("producer", ""),
                bitcode=record["bitcode"],
                metadata=meta,
            ))
        except (ValueError, KeyError, TypeError) as exc:
            raise BinaryFormatError(
                f"{origin}: embedded IR record at offset {record['offset']} has "
                f"malformed metadata ({exc!r})") from None
    return modules


def read_embedded_modules(path: str | Path) -> list[EmbeddedModule]:
    """Every embedded device module in an executable, library or object.

    Raises:
        BinaryFormatError: the file is not ELF/ar, or its records are corrupt.
        OSError: the file cannot be read.
    """
    modules: list[EmbeddedModule] = []
    for member in elf_members(path):
        for name, contents in section_names_and_data(member):
            if name == SECTION:
                modules.extend(decode_records(bytes(contents), member.name))
    return modules
