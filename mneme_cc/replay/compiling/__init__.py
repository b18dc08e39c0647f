"""Compiling: a recorded kernel's IR (or PTX) to a cubin under a ReplayConfig:
pipeline, numerics, contraction, PTX, ptxas or nvJitLink, the compile cache.

    from mneme_cc.replay.compiling import compile_kernel, codegen_of
"""

from __future__ import annotations

__all__ = ["Assembler", "Codegen", "CompiledKernel", "KernelLaunch", "Pipeline", "Resources",
           "codegen_of", "compile_cubin", "compile_instance", "compile_kernel", "compile_ptx",
           "numerics_changes"]

_HOME = {"Assembler": "assembler", "Codegen": "numerics", "CompiledKernel": "compiler",
         "KernelLaunch": "jit", "Pipeline": "pipeline", "Resources": "cubin",
         "codegen_of": "numerics", "compile_cubin": "cubin", "compile_instance": "compiler",
         "compile_kernel": "compiler", "compile_ptx": "jit", "numerics_changes": "numerics"}


def __getattr__(name: str):
    # Kept import-light: llvmlite and the CUDA bindings load with the modules that use them.
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(name)
