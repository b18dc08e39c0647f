"""The embedded-IR record format, through the C++ code the plugin writes it with."""

from __future__ import annotations

import json
import shutil
import struct

import pytest
from conftest import SAMPLES, run

from mneme_cc import _native
from mneme_cc.drivers.elf import elf_members, section_names_and_data
from mneme_cc.drivers.embedded import decode_records, read_embedded_modules
from mneme_cc.errors import BinaryFormatError

META = json.dumps({"arch": "sm_90", "source": "a.cu", "triple": "nvptx64-nvidia-cuda",
                   "kernels": [{"name": "_Z1kv", "demangled": "k()"}], "globals": []})


def test_round_trip_and_alignment():
    first = _native.encode_embedded_ir(META, b"BC\xc0\xde" + b"\x01" * 13)
    second = _native.encode_embedded_ir(META.replace("a.cu", "b.cu"), b"BC\xc0\xde")
    assert len(first) % 8 == 0 and len(second) % 8 == 0
    # Linkers may pad between sections: zero bytes between records are skipped.
    records = _native.decode_embedded_ir(first + b"\0" * 8 + second)
    assert [r["bitcode"] for r in records] == [b"BC\xc0\xde" + b"\x01" * 13, b"BC\xc0\xde"]
    assert [json.loads(r["metadata"])["source"] for r in records] == ["a.cu", "b.cu"]
    assert [r["offset"] for r in records] == [0, len(first) + 8]
    assert records[0]["version"] == _native.EMBEDDED_IR_FORMAT_VERSION


def test_header_layout_is_as_documented():
    record = _native.encode_embedded_ir(META, b"xyz")
    magic, version, meta_size, ir_size = struct.unpack_from("<8sIIQ", record)
    assert magic == b"MNEMEIR\0" and version == 2
    assert (meta_size, ir_size) == (len(META), 3)
    assert record[32:32 + meta_size].decode() == META


@pytest.mark.parametrize("position", [40, -12])  # in the metadata, in the bitcode
def test_a_flipped_byte_is_a_checksum_error(position):
    record = bytearray(_native.encode_embedded_ir(META, b"\x42" * 64))
    record[position if position > 0 else len(record) + position] ^= 0x01
    with pytest.raises(ValueError, match="offset 0: checksum mismatch"):
        _native.decode_embedded_ir(bytes(record))


def test_truncation_and_foreign_data_are_named():
    record = _native.encode_embedded_ir(META, b"\x42" * 64)
    with pytest.raises(ValueError, match="truncated payload"):
        _native.decode_embedded_ir(record[:50])
    with pytest.raises(ValueError, match="truncated header"):
        _native.decode_embedded_ir(record[:20])
    with pytest.raises(ValueError, match="bad magic"):
        _native.decode_embedded_ir(b"NOTMNEME" + record[8:])


def test_other_format_versions_are_refused_with_advice():
    record = bytearray(_native.encode_embedded_ir(META, b"bc"))
    struct.pack_into("<I", record, 8, 99)
    with pytest.raises(ValueError, match="format version 99 is not supported.*rebuild"):
        _native.decode_embedded_ir(bytes(record))


def test_malformed_metadata_is_a_format_error():
    record = _native.encode_embedded_ir('{"arch": "sm_90"}', b"bc")
    with pytest.raises(BinaryFormatError, match="x.o: .*offset 0 has malformed metadata"):
        decode_records(record, "x.o")


def test_corrupt_binary_is_reported_by_file_and_offset(tmp_path):
    obj = tmp_path / "k.o"
    run(["mneme-cxx", "-c", str(SAMPLES / "variant.cu"), "-DVARIANT=3", "-o", str(obj)])
    assert len(read_embedded_modules(obj)) == 1
    # Flip one byte inside the section, in the file on disk.
    data = bytearray(obj.read_bytes())
    (member,) = elf_members(obj)
    section = dict(section_names_and_data(member))[".mneme_ir"]
    start = bytes(data).index(bytes(section[:64]))
    data[start + 100] ^= 0xFF
    bad = tmp_path / "bad.o"
    bad.write_bytes(bytes(data))
    with pytest.raises(BinaryFormatError, match=r"bad\.o: embedded IR record at offset 0: checksum"):
        read_embedded_modules(bad)
    proc = run(["mneme", "inspect", str(bad)], check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "checksum mismatch" in proc.stderr


def test_archive_members_are_read(tmp_path):
    for n in (1, 2):
        run(["mneme-cxx", "-c", str(SAMPLES / "variant.cu"), f"-DVARIANT={n}",
             "-o", str(tmp_path / f"a_very_long_member_name_{n}.o")])
    archive = tmp_path / "libv.a"
    run(["ar", "rcs", str(archive), *sorted(str(p) for p in tmp_path.glob("*.o"))])
    modules = read_embedded_modules(archive)
    assert [m.origin.split("(")[1] for m in modules] == [
        "a_very_long_member_name_1.o)", "a_very_long_member_name_2.o)"]
    assert [m.kernels[0].name for m in modules] == ["_Z9variant_1Pi", "_Z9variant_2Pi"]


def _ar_member(name: bytes, body: bytes) -> bytes:
    header = name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"644".ljust(8)
    return header + str(len(body)).encode().ljust(10) + b"`\n" + body + b"\n" * (len(body) & 1)


@pytest.mark.parametrize("damage, message", [
    (lambda whole: whole[:-40], r"archive member 'k\.o/' at offset 8 runs past the end"),
    (lambda whole: whole.replace(b"`\n", b"xx", 1), r"malformed archive member header at offset 8"),
    (lambda whole: whole.replace(b"k.o/", b"/99 ", 1), r"archive member '/99' names no entry"),
])
def test_a_damaged_archive_is_named_as_damaged(tmp_path, damage, message):
    elf = b"\x7fELF\x02\x01" + bytes(58)  # a header with no sections
    whole = b"!<arch>\n" + _ar_member(b"k.o/", elf + bytes(100))
    assert len(elf_members(_write(tmp_path / "good.a", whole))) == 1
    bad = _write(tmp_path / "bad.a", damage(whole))
    with pytest.raises(BinaryFormatError, match=r"bad\.a: " + message):
        elf_members(bad)
    proc = run(["mneme", "inspect", str(bad)], check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "bad.a" in proc.stderr


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_stripping_keeps_the_ir(tmp_path):
    exe = tmp_path / "app"
    run(["mneme-cxx", str(SAMPLES / "multi" / "app" / "main.cu"),
         str(SAMPLES / "multi" / "scale" / "kernels.cu"),
         str(SAMPLES / "multi" / "stencil" / "kernels.cu"), "-o", str(exe)])
    stripped = tmp_path / "app.stripped"
    shutil.copy(exe, stripped)
    run(["strip", str(stripped)])
    assert len(read_embedded_modules(stripped)) == 3
    assert [m.bitcode for m in read_embedded_modules(stripped)] == [
        m.bitcode for m in read_embedded_modules(exe)]


def test_version_1_fixture_still_reads():
    """An object built by mneme-cc 0.1.0 (format 1), kept in the repo: a
    future format must keep reading it or refuse it with advice."""
    from conftest import TESTS

    (module,) = read_embedded_modules(TESTS / "fixtures" / "embedded-ir-v1.o")
    assert module.arch == "sm_90"
    assert [k.name for k in module.kernels] == ["_Z10variant_42Pi"]
    assert module.bitcode[:4] == b"BC\xc0\xde"
    assert module.producer.startswith("mneme-cc 0.1.0 (LLVM 22.")
    # It carries no codegen: replay reads the build's numerics off its IR.
    assert "codegen" not in module.metadata
    inspected = json.loads(run(["mneme", "inspect", "--json",
                                str(TESTS / "fixtures" / "embedded-ir-v1.o")]).stdout)
    codegen = inspected["modules"][0]["codegen"]
    assert (codegen["source"], codegen["opt_level"], codegen["fp_contract"]) == \
        ("inferred", "3", "fast")
