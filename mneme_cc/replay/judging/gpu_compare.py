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
        self.capacity = 0  # buffer pairs the result slots hold
        self.results = 0   # per pair: (differing bytes, first offset), two u64
        self._slots(1)

    def _slots(self, pairs: int) -> None:
        if pairs > self.capacity:
            if self.results:
                self.device.free(self.results)
            self.capacity = max(pairs, 2 * self.capacity)
            self.results = self.device.alloc(16 * self.capacity, "allocating")

    def _launch(self, function, *args: int, work: int) -> None:
        values = [ctypes.c_uint64(v) for v in args]
        pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        blocks = max(1, min(4096, -(-work // 256)))  # whole warps: each sums its lanes' counts
        self.device.launch(function, (blocks, 1, 1), (256, 1, 1), 0, ctypes.addressof(pointers),
                           what="comparing")

    def differing_all(self, pairs: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
        """(number of differing bytes, offset of the first) of [a, a+size) and
        [b, b+size) for each (a, b, size): every comparison queued, then one wait."""
        if not pairs:
            return []
        self._slots(len(pairs))
        start = np.tile(np.array([0, (1 << 64) - 1], np.uint64), len(pairs))
        # On the session's stream, as the comparisons are: reset before they run,
        # without waiting for the launch queued before them.
        self.device.copy_to_device_async(self.results, start, "comparing")
        for i, (a, b, size) in enumerate(pairs):
            count, first = self.results + 16 * i, self.results + 16 * i + 8
            vectors = size // 16 if (a | b) % 16 == 0 else 0
            if vectors:
                self._launch(self.vectors, a, b, vectors, count, first, work=vectors)
            if vectors * 16 < size:
                self._launch(self.bytes, a, b, vectors * 16, size, count, first,
                             work=size - vectors * 16)
        self.device.synchronize("comparing")
        found = dev.copy_from_device(self.results, 16 * len(pairs), "comparing").view(np.uint64)
        return [(int(found[2 * i]), int(found[2 * i + 1])) for i in range(len(pairs))]

    def differing(self, a: int, b: int, size: int) -> tuple[int, int]:
        """(number of differing bytes, offset of the first) of [a, a+size) and [b, b+size)."""
        return self.differing_all([(a, b, size)])[0]

    def close(self) -> None:
        self.device.free(self.results)
        self.module.unload()
