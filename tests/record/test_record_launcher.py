"""`mneme record` says why a run recorded nothing, naming a program that links
the static CUDA runtime when none of its launches reached the recorder, and
with -v what its own start cost; it runs the application from its native
launcher, with no interpreter left in between."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import nvcc_path, run

from mneme_cc.build_info import build_info
from mneme_cc.record import RecordSettings, run_recorded


def test_a_run_that_records_nothing_says_so(tmp_path):
    proc = run(["mneme", "record", "-rdb", str(tmp_path / "db"), "--", "true"])
    assert proc.stderr.strip().splitlines()[-1] == (
        "mneme: warning: recorded no instance: no kernel launch reached the recorder (none was "
        "launched, none matched --kernels, --skip skipped them all, this rank is not among "
        "--ranks, or the database holds every instance launched already)")


def test_verbose_says_what_mneme_record_s_own_start_cost(tmp_path):
    import re

    proc = run(["mneme", "record", "-v", "-rdb", str(tmp_path / "db"), "--", "true"])
    m = re.search(r"mneme: ([\d.]+) ms of CPU in mneme record \(its entry point, the "
                  r"checks, the database\) before the application starts", proc.stderr)
    assert m and 0 < float(m.group(1)) < 10_000, proc.stderr


def test_the_application_is_the_launcher_s_child_and_no_python_stays(tmp_path):
    """`mneme record` execs the native launcher: the application's parent is it."""
    proc = run(["mneme", "record", "-rdb", str(tmp_path / "db"), "--", "sh", "-c",
                "cat /proc/$PPID/comm; readlink /proc/$PPID/exe"])
    comm, exe = proc.stdout.split()
    assert comm == "mneme-record" and exe == str(build_info().launcher)


def test_the_environment_s_mneme_record_command_is_the_launcher(tmp_path):
    """The scripts directory's `mneme-record` takes `mneme record`'s options
    with no interpreter's start; it finds the recorder in its environment's
    package, and a copy outside any environment says it cannot."""
    import shutil
    import sysconfig

    command = Path(sysconfig.get_path("scripts")) / "mneme-record"
    proc = run([str(command), "-rdb", str(tmp_path / "db"), "--", "sh", "-c",
                "echo $LD_PRELOAD"])
    assert proc.stdout.split(":")[0].strip() == str(build_info().recorder.resolve())
    assert (tmp_path / "db" / "database.json").is_file()
    stray = tmp_path / "elsewhere" / "mneme-record"
    stray.parent.mkdir()
    shutil.copy2(command, stray)
    proc = run([str(stray), "-rdb", str(tmp_path / "db2"), "--", "true"], check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("mneme: error: the recorder ")
    assert "reinstall mneme-cc" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_the_application_gets_the_signals_python_ignores_back(tmp_path):
    """Python ignores SIGPIPE and SIGXFSZ; the application under `mneme record`
    gets them as it would from the shell (a pipe's reader leaving ends a writer)."""
    proc = run(["mneme", "record", "-rdb", str(tmp_path / "db"), "--", "sh", "-c",
                "grep ^SigIgn: /proc/self/status"])
    ignored = int(proc.stdout.split()[1], 16)
    assert not ignored & (1 << (13 - 1)) and not ignored & (1 << (25 - 1))  # SIGPIPE, SIGXFSZ


def test_ranks_creating_one_database_together_all_start(tmp_path):
    """Processes of one job create the same database at once: none refuses it
    as a folder that is not a database."""
    import subprocess

    db = tmp_path / "db"
    procs = [subprocess.Popen([str(build_info().launcher), "-rdb", str(db), "--", "true"],
                              stderr=subprocess.PIPE, text=True) for _ in range(24)]
    errors = [p.communicate()[1] for p in procs if p.wait() != 0]
    assert not errors, errors[0]


def test_run_recorded_runs_the_launcher_from_python(tmp_path):
    settings = RecordSettings(tmp_path / "db", kernels="add", vass=1 << 30, verbose=True)
    assert settings.arguments()[-3:] == ["--kernels=add", "--vass=1073741824", "-v"]
    assert run_recorded(settings, ["sh", "-c", "exit 5"]) == 5
    assert (tmp_path / "db" / "database.json").is_file()


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
    proc = run(["mneme", "record", "-rdb", str(tmp_path / "db"), "--", str(static)])
    assert "links the CUDA runtime statically" in proc.stderr
    assert "CUDA_RUNTIME_LIBRARY Shared" in proc.stderr
    proc = run(["mneme", "record", "-rdb", str(tmp_path / "db"), "--", str(shared)])
    assert "recorded no instance" in proc.stderr and "statically" not in proc.stderr
