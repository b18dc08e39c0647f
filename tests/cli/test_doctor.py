"""`mneme doctor`: every part with what was found or how to get it; exit 0
only when record, replay and tune can all run."""

from __future__ import annotations

import json

from conftest import run

from mneme_cc.cli.doctor_command import RECORD, REPLAY, TUNE, Part, ready


def test_doctor_names_each_part_and_the_fix_for_what_is_missing():
    proc = run(["mneme", "doctor", "--json"], check=False)
    report = json.loads(proc.stdout)
    parts = {p["name"]: p for p in report["parts"]}
    assert {"pass plugin", "clang 22", "CUDA toolkit", "recorder", "NVIDIA driver", "GPU",
            "ptxas", "nvJitLink", "llvmlite", "cuda-bindings", "Optuna",
            "PostgreSQL driver"} <= set(parts)
    for part in parts.values():
        assert part["found"] or part["fix"], part  # nothing missing without a fix
    # This machine builds (the suite runs here) ...
    assert parts["pass plugin"]["found"] and parts["recorder"]["found"]
    assert report["ready"]["build"]
    # ... and the exit status follows whether record, replay and tune can run.
    runs = all(report["ready"][c] for c in ("record", "replay", "tune"))
    assert proc.returncode == (0 if runs else 1)
    if not parts["GPU"]["found"]:
        assert not report["ready"]["record"] and "NVIDIA" in parts["GPU"]["fix"]
    text = run(["mneme", "doctor"], check=False).stdout
    assert "ready: build yes" in text and "Traceback" not in text


def test_a_command_is_ready_only_with_every_part_it_needs():
    parts = [Part("driver", True, "13.0", "", (RECORD, REPLAY, TUNE)),
             Part("optuna", False, "not installed", "pip install", (TUNE,)),
             Part("ptxas", False, "none", "optional", ())]
    can = ready(parts)
    assert can[RECORD] and can[REPLAY] and not can[TUNE]
