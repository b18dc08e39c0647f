"""The old name of `mneme_cc.drivers`, kept for one release.

`import mneme_cc.build` and `import mneme_cc.build.nvcc` still work: each
name is the `mneme_cc.drivers` module itself, with a DeprecationWarning.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings

from mneme_cc import drivers

warnings.warn("mneme_cc.build is now mneme_cc.drivers; the old name goes in the next release",
              DeprecationWarning, stacklevel=2)

for _info in pkgutil.iter_modules(drivers.__path__):
    sys.modules[f"{__name__}.{_info.name}"] = importlib.import_module(
        f"mneme_cc.drivers.{_info.name}")
sys.modules[__name__] = drivers
