"""Runs the plugin's lit/FileCheck suite (tests/lit) as one test."""

from __future__ import annotations

from pathlib import Path

from conftest import run


def test_lit_suite():
    lit_dir = Path(__file__).parents[1] / "lit"
    proc = run(["lit", "-v", str(lit_dir)], check=False)  # the script beside this Python
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Passed" in proc.stdout
