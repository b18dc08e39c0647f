"""The drivers running a build of relocatable device code as several
commands: stopped midway, asked for one command."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import RDC, tool_env

from mneme_cc.drivers import driver
from mneme_cc.errors import UsageError

SOURCES = [str(RDC / f"{name}.cu") for name in ("main", "integrate", "physics")]


def _compiles(pid: int) -> list[str]:
    """The children of `pid` that compile relocatable device code."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [c for c in children
                if b"-fgpu-rdc" in Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_build_stops_clang_and_removes_its_scratch(signum, tmp_path):
    proc = subprocess.Popen(["mneme-cxx", "-fgpu-rdc", "-O2", *SOURCES, "-o", str(tmp_path / "app")],
                            env=tool_env(TMPDIR=str(tmp_path)), stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    children = _compiles(proc.pid)
    while not children and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
        children = _compiles(proc.pid)
    assert children, "mneme-cxx started no compile"
    assert list(tmp_path.glob("mneme-rdc-*"))
    proc.send_signal(signum)
    assert proc.wait(timeout=120) == 128 + signum  # as the shell reports a signal
    assert not any(Path(f"/proc/{pid}").exists() for pid in children)
    assert not list(tmp_path.glob("mneme-rdc-*")) and not list(tmp_path.glob("mneme-link-*"))
    assert not (tmp_path / "app").exists()


def test_clang_command_refuses_a_build_of_several_commands(tmp_path):
    with pytest.raises(UsageError, match="more than one clang command"):
        driver.clang_command("c++", ["-fgpu-rdc", *SOURCES, "-o", str(tmp_path / "app")])
    assert driver.clang_command("c++", ["-fgpu-rdc", "-c", SOURCES[0]])[-2:] == \
        ["-c", SOURCES[0]]
