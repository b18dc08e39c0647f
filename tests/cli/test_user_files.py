"""Files a user hands over, or a study left behind, that are not what they
should be: each is one line on stderr and a non-zero exit, never a traceback
or a read that blocks (a FIFO where a JSON file belongs), and nothing is
written outside the place named."""

from __future__ import annotations

import json
import os
import stat

import pytest
from conftest import run

from mneme_cc.errors import UsageError
from mneme_cc.replay.config import ReplayConfig


def one_line_error(cmd: list[str], says: str) -> None:
    proc = run(cmd, check=False, timeout=60)
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert says in proc.stderr, proc.stderr


@pytest.mark.parametrize("fields, says", [
    ({"iterations": "abc"}, "iterations must be an integer, not 'abc'"),
    ({"iterations": True}, "iterations must be an integer"),
    ({"launch_bounds": 1}, "launch_bounds must be true or false"),
    ({"tuning": []}, "tuning must be a JSON object"),
    ({"specialize_args": ["a"]}, "specialize_args must be a list of integers"),
    ({"grid": 1.5}, "grid must be three positive integers"),
    ({"pipeline": 3}, "pipeline must be a string"),
])
def test_a_config_field_of_the_wrong_type_is_named(tmp_path, fields, says):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    with pytest.raises(UsageError, match=f"^{path}: {says}"):
        ReplayConfig.load(path)


def test_a_config_of_the_right_types_still_loads(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"grid": 64, "specialize_args": [2, 1], "max_registers": None,
                                "tuning": {}, "iterations": 5}))
    config = ReplayConfig.load(path)
    assert config.grid == (64, 1, 1) and config.specialize_args == (1, 2)


def test_a_fifo_or_a_directory_given_as_a_json_file_is_refused_without_reading(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):  # a read would block
        ReplayConfig.load(fifo)
    with pytest.raises(UsageError, match="a directory, not a ReplayConfig"):
        ReplayConfig.load(tmp_path)


def test_an_output_that_is_a_fifo_or_a_directory_is_refused_and_left_in_place(tmp_path):
    """Renaming a new file over /dev/stdout would replace the link, not write it."""
    from mneme_cc.fileio import write_text_atomic

    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="report.json is not a regular file"):
        write_text_atomic(fifo, "{}")
    with pytest.raises(UsageError, match="is a directory: give a file name"):
        write_text_atomic(tmp_path, "{}")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and sorted(os.listdir(tmp_path)) == ["report.json"]
    # Through a link to a FIFO as well; through a link to a file, the file is written.
    (tmp_path / "via-fifo").symlink_to(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        write_text_atomic(tmp_path / "via-fifo", "{}")
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "via-file").symlink_to(tmp_path / "real.json")
    write_text_atomic(tmp_path / "via-file", "new")
    assert (tmp_path / "via-file").is_symlink() and (tmp_path / "real.json").read_text() == "new"


def test_export_refuses_a_best_json_that_is_missing_a_fifo_or_not_a_time(tmp_path):
    out = tmp_path / "out.json"
    one_line_error(["mneme", "export", str(tmp_path / "none.json"), "--proteus", str(out)],
                   "none.json: no such file")
    fifo = tmp_path / "best.json"
    os.mkfifo(fifo)
    one_line_error(["mneme", "export", str(fifo), "--proteus", str(out)], "not a regular file")
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps({"kernel": "k", "median_ms": float("nan"), "config": {},
                               "launch": {"grid": [1, 1, 1], "block": [32, 1, 1],
                                          "shared_mem_bytes": 0}}))
    one_line_error(["mneme", "export", str(nan), "--proteus", str(out)],
                   "not a best.json written by `mneme tune`")
    assert not out.exists()


def make_study(db, name="s1"):
    """A record database with one study: its summary, trials and journal."""
    import numpy as np
    import optuna
    from synthetic_db import make_database

    a = np.arange(64, dtype=np.float32)
    make_database(db, a, a, a + a)
    study_dir = db / "tune" / name
    study_dir.mkdir(parents=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    backend = optuna.storages.journal.JournalFileBackend(str(study_dir / "study.log"))
    study = optuna.create_study(study_name=name,
                                storage=optuna.storages.JournalStorage(backend))
    study.optimize(lambda t: float(t.suggest_int("x", 1, 9)), n_trials=3)
    summary = {"study": name, "storage": None, "objectives": ["median_ms"], "kernel": "k",
               "instance": "i", "space": "auto", "sampler": "tpe", "device": {"name": "gpu"},
               "trials": 3, "seconds": 1.0, "observations_per_second": 3.0,
               "outcomes": {"verified": 3}, "speedup": 1.1}
    (study_dir / "summary.json").write_text(json.dumps(summary))
    (study_dir / "trials.jsonl").write_text("".join(
        json.dumps({"trial": i, "values": [i + 1.0], "params": {"x": i + 1},
                    "outcome": "verified"}) + "\n" for i in range(3)))
    return study_dir


def test_report_refuses_a_path_for_a_study_and_a_damaged_study_in_one_line(tmp_path):
    db = tmp_path / "db"
    study = make_study(db)
    report = ["mneme", "report", "-rdb", str(db)]
    # A study is a name under DIR/tune: a path out of it writes nothing there.
    one_line_error([*report, "--study", "../../evil"], "not by a path")
    assert not (tmp_path / "evil").exists()
    run([*report, "--out", str(tmp_path / "fine")])  # the study as written reports
    run([*report, "--study", "s1/", "--out", str(tmp_path / "fine")])  # as a shell completes it
    (tmp_path / "afile").write_text("")
    one_line_error([*report, "--out", str(tmp_path / "afile")], "afile: not a directory")
    summary = json.loads((study / "summary.json").read_text())
    (study / "summary.json").write_text(json.dumps({**summary, "baseline": "x"}))
    one_line_error(report, "its baseline is not what `mneme tune` writes")
    (study / "summary.json").write_text(json.dumps({**summary, "objectives": []}))
    one_line_error(report, "its objectives are not what `mneme tune` writes")
    (study / "summary.json").write_text(json.dumps(summary))
    (study / "study.log").write_text("garbage\n")
    one_line_error(report, "holds no study 's1'")
    (study / "study.log").unlink()
    one_line_error(report, "the study's storage is missing")
    assert not (study / "study.log").exists()  # a report reads a journal, never makes one
    os.mkfifo(study / "study.log")
    one_line_error(report, "not a regular file, so not the study's storage")
    (study / "trials.jsonl").unlink()
    os.mkfifo(study / "trials.jsonl")
    one_line_error(report, "trials.jsonl: not a regular file")


def test_a_bundle_whose_manifest_is_a_fifo_is_refused(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    os.mkfifo(bundle / "manifest.json")
    one_line_error(["mneme", "run", "--tuned", str(bundle), "--", "true"],
                   "not a regular file, so not a bundle's manifest")


@pytest.mark.parametrize("cmd, says", [
    (["mneme", "compact", "-j", "0"], "mneme compact: Invalid value for '--jobs'"),
    (["mneme", "bogus"], "No such command 'bogus'"),
    (["mneme", "ls", "--bogus"], "mneme ls: No such option: --bogus"),
    (["mneme", "config"], "Missing argument"),
    (["mneme", "tune", "--seed", "x"], "Invalid value for '--seed'"),
    (["mneme-export", "--bogus"], "mneme-export: No such option: --bogus"),
])
def test_a_command_line_that_does_not_parse_is_one_line(cmd, says):
    one_line_error(cmd, says)
    assert run(cmd, check=False).returncode == 2


def test_a_bare_mneme_shows_its_help():
    proc = run(["mneme"], check=False)
    assert proc.returncode == 2 and proc.stdout.count("Usage: mneme") == 1 and not proc.stderr
