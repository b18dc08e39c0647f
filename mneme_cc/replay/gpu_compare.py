"""Comparing device buffers on the device: the fast path of verification.

One small kernel (written here in LLVM IR and compiled through the same
llvmlite + nvJitLink path as replayed kernels) counts the differing bytes of
two buffers and finds the first. Only a buffer that differs is copied to the
host, where the policies of verify.py decide and describe it.
"""

from __future__ import annotations

import ctypes

from mneme_cc.replay import device as dev

KERNEL = "mneme_compare"

# count[0] += differing bytes; first[0] = min(first[0], index of the first).
COMPARE_IR = """
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()

define ptx_kernel void @mneme_compare(ptr addrspace(1) %a, ptr addrspace(1) %b, i64 %n,
                                      ptr addrspace(1) %count, ptr addrspace(1) %first) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %nctaid = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %tid64 = zext i32 %tid to i64
  %ctaid64 = zext i32 %ctaid to i64
  %ntid64 = zext i32 %ntid to i64
  %nctaid64 = zext i32 %nctaid to i64
  %base = mul i64 %ctaid64, %ntid64
  %start = add i64 %base, %tid64
  %stride = mul i64 %ntid64, %nctaid64
  br label %loop

loop:
  %i = phi i64 [ %start, %entry ], [ %next, %step ]
  %done = icmp uge i64 %i, %n
  br i1 %done, label %exit, label %body

body:
  %pa = getelementptr i8, ptr addrspace(1) %a, i64 %i
  %pb = getelementptr i8, ptr addrspace(1) %b, i64 %i
  %va = load i8, ptr addrspace(1) %pa, align 1
  %vb = load i8, ptr addrspace(1) %pb, align 1
  %same = icmp eq i8 %va, %vb
  br i1 %same, label %step, label %differ

differ:
  %c = atomicrmw add ptr addrspace(1) %count, i64 1 monotonic
  %f = atomicrmw umin ptr addrspace(1) %first, i64 %i monotonic
  br label %step

step:
  %next = add i64 %i, %stride
  br label %loop

exit:
  ret void
}
"""


class GpuComparer:
    """Counts differing bytes between device buffers, on the device."""

    def __init__(self, device: dev.Device):
        from mneme_cc.replay.config import ReplayConfig
        from mneme_cc.replay.cubin import compile_cubin
        from mneme_cc.replay.jit import llvm_binding

        drv = dev._driver()
        llvm = llvm_binding()
        module = llvm.parse_assembly(COMPARE_IR)
        machine = llvm.Target.from_triple(module.triple).create_target_machine(
            cpu=device.arch, opt=3)
        ptx = machine.emit_assembly(module)
        cubin = compile_cubin(ptx, KERNEL, ReplayConfig(), device.arch)
        self.module = dev.check(drv.cuModuleLoadData(cubin.data), "loading the compare kernel")
        self.function = dev.check(drv.cuModuleGetFunction(self.module, KERNEL.encode()),
                                  "loading the compare kernel")
        self.result = int(dev.check(drv.cuMemAlloc(16), "allocating"))
        self.stream = device.stream

    def differing(self, a: int, b: int, size: int) -> tuple[int, int]:
        """(number of differing bytes, offset of the first) of [a, a+size) and [b, b+size)."""
        drv = dev._driver()
        init = (ctypes.c_uint64 * 2)(0, (1 << 64) - 1)
        dev.check(drv.cuMemcpyHtoD(self.result, ctypes.addressof(init), 16), "comparing")
        values = [ctypes.c_uint64(a), ctypes.c_uint64(b), ctypes.c_uint64(size),
                  ctypes.c_uint64(self.result), ctypes.c_uint64(self.result + 8)]
        pointers = (ctypes.c_void_p * 5)(*[ctypes.addressof(v) for v in values])
        blocks = max(1, min(4096, -(-size // 256)))
        dev.check(drv.cuLaunchKernel(self.function, blocks, 1, 1, 256, 1, 1, 0, self.stream,
                                     ctypes.addressof(pointers), 0), "comparing")
        dev.check(drv.cuStreamSynchronize(self.stream), "comparing")
        out = (ctypes.c_uint64 * 2)()
        dev.check(drv.cuMemcpyDtoH(ctypes.addressof(out), self.result, 16), "comparing")
        return int(out[0]), int(out[1])

    def close(self) -> None:
        drv = dev._driver()
        drv.cuMemFree(self.result)
        drv.cuModuleUnload(self.module)
