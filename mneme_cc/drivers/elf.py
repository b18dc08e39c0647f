"""Just enough ELF and `ar` reading to find named sections in build outputs.

Executables, shared libraries and relocatable objects are ELF files; a
static library is an `ar` archive of them.  Only 64-bit little-endian ELF
is read (x86-64 and AArch64 Linux), which is where CUDA runs.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mneme_cc.errors import BinaryFormatError

_ELF_MAGIC = b"\x7fELF"
_AR_MAGIC = b"!<arch>\n"
_SHT_NOBITS = 8


@dataclass(frozen=True)
class Member:
    """One ELF image: a whole file, or one member of an archive."""

    name: str  # "file" or "archive(member.o)"
    data: memoryview


def _check_elf(name: str, data: memoryview) -> None:
    if bytes(data[:4]) != _ELF_MAGIC:
        raise BinaryFormatError(f"{name} is not an ELF file or archive")
    if data[4] != 2 or data[5] != 1:
        raise BinaryFormatError(f"{name} is not a 64-bit little-endian ELF file")


def section_names_and_data(member: Member) -> Iterator[tuple[str, memoryview]]:
    """Yields (name, contents) for every section that has file contents."""
    data = member.data
    _check_elf(member.name, data)
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        if shoff == 0:
            return
        headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                   for i in range(shnum)]
        strtab = headers[shstrndx]
        names = data[strtab[4]:strtab[4] + strtab[5]]
        for name_off, kind, _flags, _addr, offset, size, *_ in headers:
            end = bytes(names[name_off:]).find(b"\0")
            name = bytes(names[name_off:name_off + end]).decode("utf-8", "replace")
            if kind == _SHT_NOBITS:
                continue
            if offset + size > len(data):
                raise BinaryFormatError(
                    f"{member.name}: section {name} runs past the end of the file (truncated?)")
            yield name, data[offset:offset + size]
    except (struct.error, IndexError, OverflowError) as exc:
        raise BinaryFormatError(f"{member.name}: malformed ELF headers ({exc})") from None


def _archive_members(name: str, data: memoryview) -> Iterator[Member]:
    pos = len(_AR_MAGIC)
    long_names = b""
    while pos + 60 <= len(data):
        header = bytes(data[pos:pos + 60])
        raw_name = header[:16].decode("ascii", "replace").rstrip()
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError:
            size = -1
        if size < 0 or header[58:60] != b"`\n":
            raise BinaryFormatError(f"{name}: malformed archive member header at offset {pos}")
        if pos + 60 + size > len(data):
            raise BinaryFormatError(f"{name}: archive member {raw_name!r} at offset {pos} runs "
                                    "past the end of the file (truncated?)")
        body = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
        if raw_name == "//":  # GNU table of long names
            long_names = bytes(body)
            continue
        if raw_name in ("/", "/SYM64/"):  # symbol tables
            continue
        if raw_name.startswith("/") and raw_name[1:].isdigit():
            start = int(raw_name[1:])
            end = long_names.find(b"/\n", start)
            if end < 0:
                raise BinaryFormatError(f"{name}: archive member {raw_name!r} names no entry of "
                                        "the archive's table of long names")
            raw_name = long_names[start:end].decode("utf-8", "replace")
        member = raw_name.rstrip("/")
        if bytes(body[:4]) == _ELF_MAGIC:
            yield Member(f"{name}({member})", body)


def elf_members(path: str | Path) -> list[Member]:
    """The ELF images in a file: itself, or an archive's ELF members.

    Raises:
        BinaryFormatError: the file is neither ELF nor an archive.
        OSError: the file cannot be read.
    """
    name = str(path)
    if not Path(path).is_file():  # a device, a pipe: endless or not a binary at all
        raise BinaryFormatError(f"{name}: not a regular file")
    data = memoryview(Path(path).read_bytes())
    if bytes(data[:8]) == _AR_MAGIC:
        return list(_archive_members(name, data))
    _check_elf(name, data)
    return [Member(name, data)]


def has_section(path: str | Path, section: str) -> bool:
    """True if the file (or any archive member) has a section of that name."""
    return any(n == section for m in elf_members(path) for n, _ in section_names_and_data(m))
