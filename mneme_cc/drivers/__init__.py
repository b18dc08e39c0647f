"""Drivers: mneme-cc, mneme-cxx and mneme-nvcc, toolchain discovery, and the IR they embed.

    from mneme_cc.drivers import read_embedded_modules
    for module in read_embedded_modules("app"):
        print(module.arch, [k.demangled for k in module.kernels])

Kept import-light: the drivers import this package on every compile.
"""

from __future__ import annotations

__all__ = ["Command", "DeviceGlobal", "EmbeddedKernel", "EmbeddedModule", "build_command",
           "clang_command", "decode_records", "find_cuda_toolkit", "linked_ir_object",
           "read_embedded_modules"]

_HOME = {"DeviceGlobal": "embedded", "EmbeddedKernel": "embedded", "EmbeddedModule": "embedded",
         "decode_records": "embedded", "read_embedded_modules": "embedded",
         "clang_command": "driver", "build_command": "driver", "Command": "driver",
         "find_cuda_toolkit": "toolchain", "linked_ir_object": "rdc_link"}


def __getattr__(name: str):
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"mneme_cc.drivers.{_HOME[name]}"), name)
    raise AttributeError(name)
