# lit configuration for the pass plugin's tests (run by tests/drivers/test_lit.py).
# ruff: noqa: F821  (lit provides `config`)
import os
import shutil
import subprocess

import lit.formats

config.name = "mneme-passes"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ll", ".cu"]
config.test_source_root = os.path.dirname(__file__)

def _mneme_config(what):
    return subprocess.run(["mneme", "config", what], capture_output=True, text=True,
                          check=True).stdout.strip()

llvm_bin = os.environ.get("MNEME_LLVM_BIN", "/usr/lib/llvm-22/bin")
config.environment["PATH"] = os.pathsep.join([llvm_bin, os.environ["PATH"]])
for name in ("HOME", "TMPDIR", "CUDA_HOME", "CUDA_PATH"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
config.substitutions.append(("%plugin", _mneme_config("plugin")))
config.substitutions.append(("%mneme-cxx", shutil.which("mneme-cxx")))
config.substitutions.append(("%mneme", shutil.which("mneme")))
