"""What `pip install` built: the plugin's file and the LLVM it targets."""

from __future__ import annotations

import functools
import json
from collections import namedtuple
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


_FIELDS = "version plugin recorder llvm_major llvm_version clang cuda_version"


class BuildInfo(namedtuple("BuildInfo", _FIELDS, defaults=("",))):
    """What was built. `plugin` (a Path) is None when LLVM 22 was missing at
    install time, `recorder` when the CUDA toolkit was; `clang` is the clang
    of the LLVM the plugin was built against, `cuda_version` the toolkit the
    recorder was built with. A named tuple: the drivers read it on every
    compile and `mneme record` on every run, where dataclasses would import
    `inspect`."""

    __slots__ = ()

    @property
    def launcher(self):
        """`mneme record`'s native launcher (a Path), installed beside the recorder
        under a fixed name (mneme_cc.cli.record_command finds it without this module)."""
        return self.recorder.with_name("mneme-record") if self.recorder else None

    def describe(self) -> list[str]:
        """What `mneme --version` prints after the version: the parts built."""
        plugin = (f"pass plugin: built against LLVM {self.llvm_version} ({self.clang})"
                  if self.plugin else "pass plugin: not built (LLVM 22 was missing)")
        recorder = (f"recorder: built with the CUDA {self.cuda_version} toolkit"
                    if self.recorder else "recorder: not built (the CUDA toolkit was missing)")
        return [plugin, recorder]


@functools.cache
def build_info() -> BuildInfo:
    path = PACKAGE_DIR / "build_info.json"
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        # A source checkout that was never built: nothing native is there.
        return BuildInfo("0+unbuilt", None, None, 22, "", "")
    plugin = PACKAGE_DIR / "lib" / raw["plugin"] if raw["plugin"] else None
    recorder = PACKAGE_DIR / "lib" / raw["recorder"] if raw.get("recorder") else None
    return BuildInfo(raw["version"], plugin, recorder, int(raw["llvm_major"]),
                     raw["llvm_version"], raw["clang"], raw.get("cuda_version", ""))
