"""Long commands (check, dataset, export --bundle) show a bar on a terminal
and add nothing to piped output."""

from __future__ import annotations

import io
import sys

from mneme_cc.cli._progress import progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress(3, "checking instances") as step:
        for _ in range(3):
            step()
    assert "checking instances" in terminal.getvalue()


def test_nothing_when_piped_or_for_one_item(monkeypatch):
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    with progress(3, "checking instances") as step:
        step()
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress(1, "checking instances") as step:
        step()
    assert piped.getvalue() == "" and terminal.getvalue() == ""
