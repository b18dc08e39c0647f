"""Comparing device buffers on the device: the fast path of verification.

Two small kernels (written in LLVM IR, compare_kernels.ll beside this
module, and compiled through the same llvmlite + nvJitLink path as replayed
kernels) count the differing bytes of two buffers and find the first. Only
a buffer that differs is copied to the host, where the policies of
verify.py decide and describe it.
"""

from __future__ import annotations

import ctypes
from importlib import resources

import numpy as np

from mneme_cc.replay.running import device as dev

BYTES, VECTORS = "mneme_compare", "mneme_compare16"

COMPARE_IR = resources.files(__package__).joinpath("compare_kernels.ll").read_text()


class GpuComparer:
    """Counts differing bytes between device buffers, on the device."""

    def __init__(self, device: dev.Device):
        from mneme_cc.replay.compiling.cubin import compile_cubin
        from mneme_cc.replay.compiling.llvm import llvm_binding
        from mneme_cc.replay.config import ReplayConfig

        llvm = llvm_binding()
        module = llvm.parse_assembly(COMPARE_IR)
        machine = llvm.Target.from_triple(module.triple).create_target_machine(
            cpu=device.arch, opt=3)
        ptx = machine.emit_assembly(module)
        cubin = compile_cubin(ptx, BYTES, ReplayConfig(), device.arch)
        self.device = device
        self.module = device.load_module(cubin.data, "loading the compare kernels")
        self.bytes, self.vectors = (self.module.function(name, "loading the compare kernels")
                                    for name in (BYTES, VECTORS))
        self.result = device.alloc(16, "allocating")

    def _launch(self, function, *args: int, work: int) -> None:
        values = [ctypes.c_uint64(v) for v in (*args, self.result, self.result + 8)]
        pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        blocks = max(1, min(4096, -(-work // 256)))
        self.device.launch(function, (blocks, 1, 1), (256, 1, 1), 0, ctypes.addressof(pointers),
                           what="comparing")

    def differing(self, a: int, b: int, size: int) -> tuple[int, int]:
        """(number of differing bytes, offset of the first) of [a, a+size) and [b, b+size)."""
        dev.copy_to_device(self.result, np.array([0, (1 << 64) - 1], np.uint64), "comparing")
        vectors = size // 16 if (a | b) % 16 == 0 else 0
        if vectors:
            self._launch(self.vectors, a, b, vectors, work=vectors)
        if vectors * 16 < size:
            self._launch(self.bytes, a, b, vectors * 16, size, work=size - vectors * 16)
        self.device.synchronize("comparing")
        count, first = dev.copy_from_device(self.result, 16, "comparing").view(np.uint64)
        return int(count), int(first)

    def close(self) -> None:
        self.device.free(self.result)
        self.module.unload()
