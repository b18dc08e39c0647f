"""The replay assembles with the application's ptxas where it can: the version
read from the recorded cubin's notes, a ptxas executable of that version, and
nvJitLink with a note otherwise."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mneme_cc.errors import UsageError
from mneme_cc.replay.compiling.assembler import _ptxas_version, assembler_for, image_ptxas_version
from mneme_cc.replay.compiling.cubin import compile_cubin
from mneme_cc.replay.config import ReplayConfig

PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
pytestmark = pytest.mark.skipif(not Path(PTXAS).is_file(), reason="no CUDA toolkit ptxas")

KERNEL = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry scale(.param .u64 out, .param .f32 factor)
{
  .reg .b64 %rd<4>;
  .reg .b32 %r<3>;
  .reg .f32 %f<3>;
  ld.param.u64 %rd1, [out];
  ld.param.f32 %f1, [factor];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd2, %rd2, %rd3;
  ld.global.f32 %f2, [%rd2];
  mul.f32 %f2, %f2, %f1;
  st.global.f32 [%rd2], %f2;
  ret;
}
"""


def test_the_application_ptxas_is_read_from_its_cubin_and_found(tmp_path):
    version = _ptxas_version(PTXAS)
    source = tmp_path / "k.ptx"
    source.write_text(KERNEL)
    subprocess.run([PTXAS, "-arch=sm_90", "-O3", str(source), "-o", str(tmp_path / "k.cubin")],
                   check=True)
    image = (tmp_path / "k.cubin").read_bytes()
    assert image_ptxas_version(b"fatbin header" + image + b"tail") == version
    assert image_ptxas_version(b"no notes here") is None and image_ptxas_version(None) is None
    found = assembler_for(version, "13.5")
    assert found.path is not None and found.name == f"ptxas {version}"
    assert found.matches_application and found.note() is None


def test_without_the_application_ptxas_nvjitlink_assembles_and_says_so():
    other = assembler_for("9.9.1", "13.5")
    assert other.path is None and other.name == "nvJitLink 13.5"
    assert not other.matches_application
    assert "ptxas 9.9.1" in other.note() and "MNEME_PTXAS" in other.note()
    unknown = assembler_for(None, "13.5")  # an image without notes: nothing to match
    assert unknown.matches_application is None and unknown.note() is None


def test_ptxas_assembles_with_the_configs_options_and_reports_resources():
    capped = compile_cubin(KERNEL, "scale", ReplayConfig(max_registers=24), "sm_90",
                           Path(PTXAS))
    assert capped.data.startswith(b"\x7fELF") and 0 < capped.resources.registers <= 24
    with pytest.raises(UsageError, match="ptxas rejected the kernel: .*error") as info:
        compile_cubin(KERNEL.replace("ret;", "bogus.op;\n  ret;"), "scale", ReplayConfig(),
                      "sm_90", Path(PTXAS))
    assert "\n" not in str(info.value)


def test_the_compile_cache_keeps_assemblers_apart():
    from mneme_cc.replay.compiling.compiler import cubin_key

    keys = {cubin_key(KERNEL, "scale", ReplayConfig(), "sm_90", name)
            for name in ("ptxas 13.0.88", "nvJitLink 13.5")}
    assert len(keys) == 2


def _assemble_with(ptxas: str) -> None:
    compile_cubin(KERNEL, "scale", ReplayConfig(), "sm_90", Path(ptxas))


def test_a_compile_killed_at_its_limit_takes_ptxas_with_it(tmp_path):
    import multiprocessing
    import os
    import time

    pid_file = tmp_path / "ptxas.pid"
    slow = tmp_path / "ptxas"
    slow.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 300\n")
    slow.chmod(0o755)
    worker = multiprocessing.get_context("spawn").Process(target=_assemble_with, args=(str(slow),))
    worker.start()
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, "the stand-in ptxas never started"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    worker.kill()  # what the executor does to a compile past --compile-timeout
    worker.join()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{child}/stat") as stat:  # a zombie waiting for init is gone too
            if stat.read().split()[2] == "Z":
                return
        time.sleep(0.05)
    os.kill(child, 9)
    raise AssertionError("ptxas outlived the compile process that ran it")


def test_a_kernel_without_ir_shares_the_cubin_stage_of_the_cache(tmp_path):
    """The application's PTX goes to the cubin stage alone: keyed by the PTX and
    ptxas's options, a run-only change hits, a register cap does not."""
    import types

    from mneme_cc.replay.compiling.compiler import compile_instance_ptx

    kernel = types.SimpleNamespace(demangled="scale", image=lambda: None,
                                   ptx_image=lambda: types.SimpleNamespace(ptx=KERNEL))
    inst = types.SimpleNamespace(kernel_name="scale", block=(32, 1, 1))

    def compile_(config):
        return compile_instance_ptx(inst, kernel, config, "sm_90", tmp_path)

    first = compile_(ReplayConfig())
    assert not first.cache_hit and "ptxas" in first.seconds and first.ptx == KERNEL
    again = compile_(ReplayConfig(iterations=3))
    assert again.cache_hit and again.cubin == first.cubin and again.ptx == KERNEL
    assert not compile_(ReplayConfig(max_registers=24)).cache_hit
