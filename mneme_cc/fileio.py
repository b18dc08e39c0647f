"""Files the user hands over or gets back: JSON objects read with one-line
errors, and writes that a reader sees whole (the old content or the new)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mneme_cc.errors import UsageError


def write_text_atomic(path: Path, text: str) -> None:
    """Writes text to a temporary name beside path, then renames it over path."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in path (a file the user gave); a one-line UsageError if not."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not {what} (a JSON object)")
    return data
