"""The recorder's staging memory (runtime/recorder/StagingMemory.cpp) built
against a fake driver: which blocks are reused, freed to make room, kept
after a trim, and forgotten at a device reset (the GPU tier stages real
copies through it)."""

from __future__ import annotations

from conftest import TESTS, run

from mneme_cc.drivers import toolchain


def test_staging_blocks_are_reused_freed_and_kept_as_documented(tmp_path):
    runtime = TESTS.parent / "runtime"
    cuda_include = toolchain.require_cuda_toolkit() / "include"
    harness = tmp_path / "staging_memory"
    run(["g++", "-std=c++17", "-Wall", "-Werror", f"-I{runtime / 'recorder'}",
         f"-I{runtime / 'include'}", f"-I{cuda_include}",
         str(TESTS / "samples" / "recorder" / "staging_memory.cpp"),
         str(runtime / "recorder" / "StagingMemory.cpp"), "-o", str(harness)])
    assert run([str(harness)]).stdout.strip() == "ok"
