"""A study's directory: what `mneme tune` writes as it goes, and what `mneme
report` and `mneme export` read.

    DIR/tune/<study>/trials.jsonl   one JSON line per trial, appended
    DIR/tune/<study>/summary.json   the study so far, rewritten as it goes
    DIR/tune/<study>/best.json      the best verified configuration and its launch
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from mneme_cc.errors import UsageError
from mneme_cc.fileio import read_json_object, regular_text, write_text_atomic

SUMMARY, BEST, TRIALS = "summary.json", "best.json", "trials.jsonl"


_NUMBER = (int, float)
#: The keys of a trials.jsonl line, with the types each may have (None: absent or null).
_TRIAL_KEYS = {"trial": (int,), "outcome": (str,), "params": (dict,), "values": (list, None),
               "duplicate": (bool, None), "median_ms": (*_NUMBER, None),
               "samples_ms": (list, None), "registers": (int, None),
               "spill_bytes": (int, None), "occupancy": (*_NUMBER, None),
               "cubin_bytes": (int, None), "error": (str, None), "seconds": (*_NUMBER, None),
               "stage_seconds": (dict, None), "config": (dict, None), "time": (str, None)}


def _well_formed(trial: Any) -> bool:
    """A trial line as the tuner writes it (a damaged one is left out and counted)."""
    if not isinstance(trial, dict):
        return False
    for key, kinds in _TRIAL_KEYS.items():
        value = trial.get(key)
        if value is None:
            if None not in kinds:
                return False
        elif isinstance(value, bool) and bool not in kinds or not isinstance(
                value, tuple(k for k in kinds if k is not None)):
            return False
    numbers = [*(trial.get("samples_ms") or []), *(trial.get("values") or []),
               *(trial.get("stage_seconds") or {}).values()]
    return all(isinstance(x, _NUMBER) and not isinstance(x, bool) for x in numbers)


class StudyDir:
    """One study's files. Reading is lazy; a missing summary is a usage error."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def create(cls, path: Path) -> StudyDir:
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    # -- writing (the tuner) ------------------------------------------------

    def append_trial(self, line: dict[str, Any]) -> None:
        # One write(2) on an O_APPEND file: lines from processes sharing the
        # study directory never interleave.
        fd = os.open(self.path / TRIALS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)

    def write(self, summary: dict[str, Any], best: dict[str, Any] | None) -> None:
        write_text_atomic(self.path / SUMMARY, json.dumps(summary, indent=2))
        if best:
            write_text_atomic(self.path / BEST, json.dumps(best, indent=2))

    # -- reading (report, export) -------------------------------------------

    @functools.cached_property
    def summary(self) -> dict[str, Any]:
        path = self.path / SUMMARY
        if not path.exists():
            raise UsageError(f"{self.path} holds no {SUMMARY}: not a study directory written "
                             "by `mneme tune`")
        return _checked_summary(path, read_json_object(path, "a study summary"))

    @functools.cached_property
    def best(self) -> dict[str, Any] | None:
        path = self.path / BEST
        return read_json_object(path, "a best.json") if path.exists() else None

    @functools.cached_property
    def _trial_lines(self) -> tuple[list[dict[str, Any]], int]:
        path = self.path / TRIALS
        if not path.exists():
            return [], 0
        out, damaged = [], 0
        for line in regular_text(path, "a study's trials", limit=None,
                                 errors="replace").splitlines():
            try:
                trial = json.loads(line)
            except ValueError:
                trial = None
            if _well_formed(trial):
                out.append(trial)
            else:
                damaged += 1
        return out, damaged

    @property
    def trials(self) -> list[dict[str, Any]]:
        """The trials appended so far. A damaged line (a writer killed mid-line,
        another's line glued to it) is left out and counted in damaged_lines."""
        return self._trial_lines[0]

    @property
    def damaged_lines(self) -> int:
        return self._trial_lines[1]

    def study(self):
        """The study in its Optuna storage (which optuna-dashboard also reads)."""
        from mneme_cc.tune import need_optuna
        from mneme_cc.tune.storage import describe, open_storage

        optuna = need_optuna()
        url = self.summary.get("storage")
        text = describe(url, self.path)
        if "://" not in text:  # a journal: read it, never make one
            journal = Path(text.removeprefix("journal:"))
            if not journal.exists():
                raise UsageError(f"{journal}: the study's storage is missing (its trials are "
                                 f"still in {self.path / TRIALS})")
            if not journal.is_file():  # a FIFO would block the read
                raise UsageError(f"{journal}: not a regular file, so not the study's storage")
        storage = open_storage(url, self.path)
        try:
            return optuna.load_study(study_name=self.summary["study"], storage=storage)
        except KeyError:
            raise UsageError(f"{text}: holds no study {self.summary['study']!r} (the storage "
                             "is damaged or another study's)") from None


#: The types of a summary's fields that readers use, where present.
_SUMMARY_TYPES: dict[str, type | tuple[type, ...]] = {
    "study": str, "kernel": str, "instance": str, "space": str, "sampler": str,
    "storage": (str, type(None)), "objectives": list, "outcomes": dict, "device": dict,
    "devices": list, "baseline": (dict, type(None)), "learned_numerics": dict,
    "trials": int, "seconds": (int, float), "observations_per_second": (int, float),
    "speedup": (int, float, type(None))}


def _checked_summary(path: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """The summary, if the fields its readers use have the types `mneme tune`
    writes; a one-line UsageError naming the first that does not."""
    for key, kinds in _SUMMARY_TYPES.items():
        if key in summary and not isinstance(summary[key], kinds):
            raise UsageError(f"{path}: its {key} is not what `mneme tune` writes (the "
                             "summary is damaged); run the study again")
    objectives = summary.get("objectives", ["?"])
    if not objectives or not all(isinstance(o, str) for o in objectives):
        raise UsageError(f"{path}: its objectives are not what `mneme tune` writes (the "
                         "summary is damaged); run the study again")
    return summary


def find_studies(database: Path, names: list[str] | None = None) -> list[StudyDir]:
    """The studies of a record database (all, or those named); each summary read.
    Only tune/ is read, so a database of any format version will do."""
    from mneme_cc.record.db import require_database

    require_database(database)
    root = database / "tune"
    if names:
        names = [n.rstrip("/") for n in names]
        odd = [n for n in names if not n or Path(n).is_absolute() or ".." in Path(n).parts]
        if odd:
            raise UsageError(f"--study {odd[0]}: a study is named by its directory in {root}, "
                             "not by a path out of it")
        missing = [n for n in names if not (root / n).is_dir()]
        if missing:
            raise UsageError(f"no study {', '.join(missing)} in {root} (`ls {root}` lists them)")
        found = [root / n for n in names]
    else:
        found = sorted(p.parent for p in root.glob(f"*/{SUMMARY}"))
        if not found:
            raise UsageError(f"no tuning studies in {database}: run `mneme tune -rdb "
                             f"{database}` first")
    studies = [StudyDir(p) for p in found]
    for study in studies:
        _ = study.summary
    return studies


def best_files(database: Path) -> list[Path]:
    """Every study's best.json in a record database, for `mneme export`."""
    return sorted((database / "tune").glob(f"*/{BEST}"))
