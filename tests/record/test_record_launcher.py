"""`mneme record` says why a run recorded nothing, naming a program that links
the static CUDA runtime when none of its launches reached the recorder, and
with -v what its own start cost."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import nvcc_path, run

from mneme_cc.record.launcher import links_static_cuda_runtime


def test_a_run_that_records_nothing_says_so(tmp_path):
    proc = run(["mneme", "record", "-rdb", str(tmp_path / "db"), "--", "true"])
    assert proc.stderr.strip().splitlines()[-1] == (
        "mneme: warning: recorded no instance: no kernel launch reached the recorder (none was "
        "launched, none matched --kernels, or --skip skipped them all)")


def test_verbose_says_what_mneme_record_s_own_start_cost(tmp_path):
    import re

    proc = run(["mneme", "record", "-v", "-rdb", str(tmp_path / "db"), "--", "true"])
    m = re.search(r"mneme: (\d+) ms of CPU in mneme record \(Python, its imports, the "
                  r"checks\) before the application starts", proc.stderr)
    assert m and 0 < int(m.group(1)) < 10_000, proc.stderr


def test_a_program_with_the_static_runtime_is_named(tmp_path):
    nvcc = nvcc_path()
    if not Path(nvcc).is_file():
        pytest.skip("NVIDIA's nvcc is not installed")
    source = tmp_path / "s.cu"
    source.write_text("__global__ void k() {}\nint main(int argc, char **) {\n"
                      "  if (argc > 5) k<<<1, 1>>>();\n  return 0;\n}\n")
    static, shared = tmp_path / "static", tmp_path / "shared"
    run([nvcc, "-arch=sm_90", str(source), "-o", str(static)])  # nvcc's default: static
    run(["mneme-nvcc", "-arch=sm_90", str(source), "-o", str(shared)])
    assert links_static_cuda_runtime(str(static)) and not links_static_cuda_runtime(str(shared))
    proc = run(["mneme", "record", "-rdb", str(tmp_path / "db"), "--", str(static)])
    assert "links the CUDA runtime statically" in proc.stderr
    assert "CUDA_RUNTIME_LIBRARY Shared" in proc.stderr
