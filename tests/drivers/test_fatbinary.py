"""Fatbinaries read without a GPU: the kernels, archs, PTX and cubins of
programs NVIDIA's nvcc built (tests/samples/anykernel), as `mneme inspect`
lists them; PTX compiled with launch bounds by the real ptxas."""

from __future__ import annotations

import json
import shutil
import struct

import pytest
from conftest import build_anykernel, run

from mneme_cc.drivers.fatbinary import (
    FATBIN_MAGIC,
    image_for,
    images_of,
    parse_fatbinaries,
    provenance,
    read_device_images,
)
from mneme_cc.errors import BinaryFormatError
from mneme_cc.replay.compiling import ptx_kernel
from mneme_cc.replay.config import ReplayConfig

SCALE_ADD, ACCUMULATE = "_Z9scale_addPfPKffi", "_Z10accumulateIdEvPT_PKS0_i"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_anykernel(tmp_path_factory.mktemp("anykernel"), "runtime_ptx", "runtime_cubin",
                           "kernels.ptx", "kernels.cubin", "kernels.fatbin")


def inspect_json(path):
    out = run(["mneme", "inspect", "--json", str(path)])
    return json.loads(out.stdout)


def test_inspect_lists_an_nvcc_build_s_kernels_archs_and_ptx(built):
    report = inspect_json(built / "runtime_ptx")
    assert report["modules"] == []  # no IR: nvcc built it
    kernels = {k["name"]: k for k in report["image_kernels"]}
    assert set(kernels) == {SCALE_ADD, ACCUMULATE}
    for k in kernels.values():
        assert k["cubin"] == ["sm_80", "sm_90"] and k["ptx"] == ["compute_90"]
    assert kernels[SCALE_ADD]["demangled"] == "scale_add(float*, float const*, float, int)"
    ptx = [i for i in report["images"] if i["kind"] == "ptx"]
    assert ptx and ptx[0]["ptx_isa"] and not ptx[0]["compressed_unread"]
    shown = run(["mneme", "inspect", str(built / "runtime_ptx")]).stdout
    assert "no embedded IR" in shown and "compute_90" in shown


def test_inspect_of_machine_code_only_shows_no_ptx(built):
    kernels = inspect_json(built / "runtime_cubin")["image_kernels"]
    assert {k["name"] for k in kernels} == {SCALE_ADD, ACCUMULATE}
    assert all(k["cubin"] == ["sm_90"] and k["ptx"] == [] for k in kernels)


@pytest.mark.parametrize("name, kinds", [("kernels.ptx", {"ptx"}), ("kernels.cubin", {"cubin"}),
                                         ("kernels.fatbin", {"ptx", "cubin"})])
def test_modules_a_program_loads_are_read_alike(built, name, kinds):
    images = images_of((built / name).read_bytes(), name)
    assert {i.kind for i in images} == kinds
    for image in images:
        assert set(image.kernels) == {"saxpy", "shift"} and image.arch == 90
    same = [(i.kind, i.arch, i.kernels, i.payload) for i in images]
    assert [(i.kind, i.arch, i.kernels, i.payload) for i in read_device_images(built / name)] \
        == same


def test_provenance_follows_what_runs_on_the_device(built):
    images = read_device_images(built / "runtime_ptx")
    assert provenance(images, SCALE_ADD, 90) == "ptx"
    assert provenance(images, SCALE_ADD, 100) == "ptx"  # compute_90 PTX runs on sm_100
    assert provenance(images, SCALE_ADD, 80) == "cubin"  # sm_80 code, no PTX at or below
    assert image_for(images, SCALE_ADD, 80, "cubin").arch == 80
    cubin_only = read_device_images(built / "runtime_cubin")
    assert provenance(cubin_only, SCALE_ADD, 90) == "cubin"


def test_damaged_fatbinaries_are_one_line_errors(built, tmp_path):
    data = (built / "kernels.fatbin").read_bytes()
    with pytest.raises(BinaryFormatError, match="runs past its end"):
        parse_fatbinaries(data[:len(data) // 2], "cut")
    bad = bytearray(data)
    struct.pack_into("<I", bad, 16 + 4, 1 << 30)  # the first entry's header size
    with pytest.raises(BinaryFormatError, match="entry"):
        parse_fatbinaries(bytes(bad), "bad")
    with pytest.raises(BinaryFormatError, match="neither a fatbinary, a cubin nor PTX"):
        images_of(b"hello", "text")
    cubin = bytearray((built / "kernels.cubin").read_bytes())
    struct.pack_into("<Q", cubin, 0x28, 2**64 - 1)  # section headers far past the end
    with pytest.raises(BinaryFormatError, match="out of range"):
        images_of(bytes(cubin), "cubin")
    assert struct.unpack_from("<I", data)[0] == FATBIN_MAGIC
    broken = tmp_path / "broken.fatbin"
    broken.write_bytes(data[:100])
    proc = run(["mneme", "inspect", str(broken)], check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


def test_ptx_takes_launch_bounds_and_assembles_with_them(built, tmp_path):
    ptx = (built / "kernels.ptx").read_text()
    config = ReplayConfig(launch_bounds=True, min_blocks_per_sm=4, max_registers=32)
    bounded = ptx_kernel.ptx_for_config(ptx, "saxpy", config, (128, 1, 1))
    entry = bounded[bounded.index(".entry saxpy"):bounded.index("{", bounded.index(".entry saxpy"))]
    assert ".maxntid 128, 1, 1" in entry and ".minnctapersm 4" in entry
    other = bounded[bounded.index(".entry shift"):]
    assert ".maxntid" not in other[:other.index("{")]  # only the kernel asked for
    again = ptx_kernel.with_launch_bounds(bounded, "saxpy", 256, None)
    assert again.count(".maxntid") == 1 and ".minnctapersm" not in again
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    from pathlib import Path

    from mneme_cc.replay.compiling.cubin import compile_cubin

    cubin = compile_cubin(bounded, "saxpy", config, "sm_90", Path(ptxas))
    assert cubin.data[:4] == b"\x7fELF" and cubin.resources.registers <= 32


def test_ir_settings_do_not_apply_to_ptx():
    from mneme_cc.errors import UsageError

    ptx_kernel.check_applies(ReplayConfig(max_registers=64, launch_bounds=True), "k")
    with pytest.raises(UsageError, match="carries PTX, not IR: pipeline, specialize_dims"):
        ptx_kernel.check_applies(ReplayConfig(pipeline="default<O1>", specialize_dims=True), "k")
    assert ptx_kernel.numerics_changes(ReplayConfig(ptxas_opt_level=1))
    assert not ptx_kernel.numerics_changes(ReplayConfig(max_registers=32))
