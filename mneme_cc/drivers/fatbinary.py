"""CUDA fatbinaries: the device images a program carries whoever compiled it.

A fatbinary is a 16-byte header (magic 0xBA55ED50, version, header size,
size of what follows) and entries, each with its own header: the kind (PTX
or a cubin, an ELF file of machine code), the arch (90 for sm_90 or
compute_90) and flags, one of which says the payload is a zstd frame (CUDA
12.8 and newer compress PTX that way by default).  An `.nv_fatbin` section
holds one or more fatbinaries back to back, 8-byte aligned.

This is what lets mneme-cc see, replay and tune kernels it did not compile:
an nvcc-built program's kernels, and images an application hands to the
driver at run time.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from mneme_cc.drivers.elf import Member, elf_members, section_names_and_data
from mneme_cc.errors import BinaryFormatError

FATBIN_MAGIC = 0xBA55ED50
_HEADER = struct.Struct("<IHHQ")
# kind, version, header size, payload size, compressed size, -, PTX ISA minor,
# major, arch, name offset, name size, flags, -, decompressed size
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_KIND = {1: "ptx", 2: "cubin"}
_FLAG_COMPRESSED_LZ = 0x2000  # CUDA's older compression, not read here
_FLAG_COMPRESSED_ZSTD = 0x8000
_ELF_MAGIC = b"\x7fELF"
_STO_CUDA_ENTRY = 0x10  # st_other bit of a kernel's symbol in a cubin
_PTX_ENTRY = re.compile(rb"\.entry\s+([A-Za-z_$%][\w$%]*)\s*\(")


@dataclass(frozen=True)
class DeviceImage:
    """One entry of a fatbinary: PTX or a cubin for one arch."""

    kind: str  # "ptx" or "cubin"
    arch: int  # 90: sm_90 for a cubin, compute_90 for PTX
    payload: bytes | None  # decompressed; None where the compression is not read
    origin: str
    ptx_isa: str = ""  # "9.0" for PTX
    kernels: tuple[str, ...] = field(default=())

    @property
    def arch_name(self) -> str:
        return f"{'compute' if self.kind == 'ptx' else 'sm'}_{self.arch}"

    @property
    def ptx(self) -> str:
        assert self.kind == "ptx" and self.payload is not None
        return self.payload.rstrip(b"\0").decode("utf-8", "replace")


def ptx_kernels(ptx: bytes) -> tuple[str, ...]:
    """The kernels (`.entry` functions) a PTX module defines."""
    return tuple(name.decode() for name in _PTX_ENTRY.findall(ptx))


def cubin_kernels(cubin: bytes, origin: str = "cubin") -> tuple[str, ...]:
    """The kernels a cubin defines: function symbols marked as entries."""
    try:
        shoff, = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, _ = struct.unpack_from("<HHH", cubin, 0x3A)
        headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize)
                   for i in range(shnum)]
    except (struct.error, OverflowError):
        raise BinaryFormatError(f"{origin}: malformed cubin (ELF headers out of range)") \
            from None
    kernels = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in headers:
        if kind != 2 or entsize != 24 or link >= len(headers):  # SHT_SYMTAB of Elf64_Sym
            continue
        strings = headers[link]
        strtab = cubin[strings[4]:strings[4] + strings[5]]
        for at in range(offset, min(offset + size, len(cubin)) - 23, 24):
            name_off, info, other = struct.unpack_from("<IBB", cubin, at)
            if info & 0xF == 2 and other & _STO_CUDA_ENTRY:  # STT_FUNC, entry
                end = strtab.find(b"\0", name_off)
                kernels.append(strtab[name_off:end if end >= 0 else None].decode("utf-8",
                                                                                  "replace"))
    return tuple(kernels)


def _decompress(payload: bytes, size: int, origin: str) -> bytes:
    from mneme_cc._native import zstd_decompress

    try:
        return zstd_decompress(payload, size)
    except ValueError as exc:
        raise BinaryFormatError(f"{origin}: a compressed entry does not decompress "
                                f"({exc})") from None


def parse_fatbinaries(data: bytes | memoryview, origin: str) -> list[DeviceImage]:
    """Every entry of the fatbinaries in data (a section, or one fatbinary)."""
    data = bytes(data)
    images: list[DeviceImage] = []
    pos = 0
    while pos + _HEADER.size <= len(data):
        magic, _version, header_size, size = _HEADER.unpack_from(data, pos)
        if magic != FATBIN_MAGIC:
            if pos == 0:
                raise BinaryFormatError(f"{origin}: not a fatbinary (bad magic)")
            pos += 8  # padding between fatbinaries
            continue
        end = pos + header_size + size
        if header_size < _HEADER.size or end > len(data):
            raise BinaryFormatError(f"{origin}: a fatbinary runs past its end (truncated?)")
        at = pos + header_size
        while at < end:
            if at + _ENTRY.size > end:
                raise BinaryFormatError(f"{origin}: a fatbinary entry header is cut short")
            (kind, _v, entry_header, payload_size, compressed_size, _u, isa_minor, isa_major,
             arch, _no, _nl, flags, _z, decompressed_size) = _ENTRY.unpack_from(data, at)
            start = at + entry_header
            if entry_header < _ENTRY.size or start + payload_size > end:
                raise BinaryFormatError(f"{origin}: a fatbinary entry runs past its fatbinary")
            at = start + payload_size
            if kind not in _KIND:
                continue
            payload: bytes | None = data[start:start + payload_size]
            if flags & _FLAG_COMPRESSED_ZSTD:
                payload = _decompress(payload[:compressed_size or payload_size],
                                      decompressed_size, origin)
            elif flags & _FLAG_COMPRESSED_LZ:
                payload = None
            name = _KIND[kind]
            kernels: tuple[str, ...] = ()
            if payload is not None:
                if name == "ptx":
                    kernels = ptx_kernels(payload)
                elif payload[:4] == _ELF_MAGIC:
                    kernels = cubin_kernels(payload, origin)
            images.append(DeviceImage(name, arch, payload, origin,
                                      f"{isa_major}.{isa_minor}" if name == "ptx" else "",
                                      kernels))
        pos = (end + 7) & ~7
    return images


_PTX_TARGET = re.compile(rb"^\s*\.target\s+(?:sm|compute)_(\d+)", re.M)
_PTX_VERSION = re.compile(rb"^\s*\.version\s+(\d+\.\d+)", re.M)


def images_of(data: bytes, origin: str) -> list[DeviceImage]:
    """The device images in what an application handed to CUDA: a
    fatbinary, a cubin, or PTX text."""
    if len(data) >= 4 and struct.unpack_from("<I", data)[0] == FATBIN_MAGIC:
        return parse_fatbinaries(data, origin)
    if data[:4] == _ELF_MAGIC:
        if len(data) < 0x34:
            raise BinaryFormatError(f"{origin}: a cubin cut short")
        arch = (struct.unpack_from("<I", data, 0x30)[0] >> 8) & 0xFF  # e_flags
        return [DeviceImage("cubin", arch, data, origin, "", cubin_kernels(data, origin))]
    target = _PTX_TARGET.search(data)
    if target is None:
        raise BinaryFormatError(f"{origin}: neither a fatbinary, a cubin nor PTX")
    version = _PTX_VERSION.search(data)
    return [DeviceImage("ptx", int(target.group(1)), data, origin,
                        version.group(1).decode() if version else "", ptx_kernels(data))]


def read_device_images(path: str | Path) -> list[DeviceImage]:
    """The PTX and cubins in a file's `.nv_fatbin` sections (an executable,
    a shared library, an object or a static library), or in a fatbinary or
    cubin file itself."""
    path = Path(path)
    try:
        head = path.open("rb").read(4)
    except OSError as exc:
        raise BinaryFormatError(f"{path}: cannot read ({exc.strerror})") from None
    if len(head) == 4 and (struct.unpack("<I", head)[0] == FATBIN_MAGIC
                           or path.suffix == ".ptx"):
        return images_of(path.read_bytes(), str(path))
    images: list[DeviceImage] = []
    for member in elf_members(path):
        if _is_cubin(member):
            images += images_of(bytes(member.data), member.name)
            continue
        for name, contents in section_names_and_data(member):
            if name == ".nv_fatbin":
                images += parse_fatbinaries(contents, f"{member.name}({name})")
    return images


def _is_cubin(member: Member) -> bool:
    """A CUDA ELF file (EM_CUDA, 190) rather than a host one."""
    data = member.data
    return len(data) > 0x34 and struct.unpack_from("<H", data, 0x12)[0] == 190


def image_for(images: list[DeviceImage], kernel: str, device_arch: int,
              kind: str) -> DeviceImage | None:
    """The image of kind that runs kernel on a device of device_arch: a
    cubin for exactly that arch, or the newest PTX at or below it."""
    fits = [i for i in images if i.kind == kind and kernel in i.kernels and i.payload is not None
            and (i.arch == device_arch if kind == "cubin" else i.arch <= device_arch)]
    return max(fits, key=lambda i: i.arch, default=None)


def demangle(names: list[str]) -> list[str]:
    """C++ names demangled by the toolchain's c++filt (the names themselves
    where there is none)."""
    import shutil
    import subprocess

    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt-22")
    if not names or tool is None:
        return list(names)
    try:
        out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True,
                             text=True, timeout=30, check=True).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return list(names)
    return out if len(out) == len(names) else list(names)


def provenance(images: list[DeviceImage], kernel: str, device_arch: int) -> str:
    """What can be tuned of a kernel without IR: `ptx` when PTX the device
    can run is there, else `cubin`."""
    return "ptx" if image_for(images, kernel, device_arch, "ptx") else "cubin"
