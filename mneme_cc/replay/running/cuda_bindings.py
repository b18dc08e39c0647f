"""The one import of cuda-bindings (cuda-python): the driver for the device
layer, nvJitLink for the cubin compiler. An optional dependency, so its
absence is a one-line error when replay needs it, not at `import mneme_cc`."""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

from mneme_cc.errors import ToolchainError


@functools.cache  # a failed import raises, so only a loaded module is kept
def cuda_bindings(module: str) -> ModuleType:
    """`cuda.bindings.<module>` ("driver", "nvjitlink"), or ToolchainError."""
    try:
        return importlib.import_module(f"cuda.bindings.{module}")
    except ImportError:
        raise ToolchainError("replay needs cuda-bindings: pip install 'mneme-cc[cuda]'") from None
