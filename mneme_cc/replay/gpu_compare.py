"""Comparing device buffers on the device: the fast path of verification.

Two small kernels (written here in LLVM IR and compiled through the same
llvmlite + nvJitLink path as replayed kernels) count the differing bytes of
two buffers and find the first. Only a buffer that differs is copied to the
host, where the policies of verify.py decide and describe it.
"""

from __future__ import annotations

import ctypes

from mneme_cc.replay import device as dev

BYTES, VECTORS = "mneme_compare", "mneme_compare16"

# Both kernels add the number of differing bytes to count[0] and lower
# first[0] to the offset of the first. mneme_compare walks bytes [begin, n);
# mneme_compare16 walks n16 aligned 16-byte vectors (a GPU loads those at full
# bandwidth; a byte at a time it reached a tenth of it) and takes a differing
# vector apart only when it differs.
COMPARE_IR = """
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
declare i32 @llvm.vector.reduce.or.v4i32(<4 x i32>)
declare i16 @llvm.ctpop.i16(i16)
declare i16 @llvm.cttz.i16(i16, i1)

define internal i64 @thread_index() {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %tid64 = zext i32 %tid to i64
  %ctaid64 = zext i32 %ctaid to i64
  %ntid64 = zext i32 %ntid to i64
  %base = mul i64 %ctaid64, %ntid64
  %index = add i64 %base, %tid64
  ret i64 %index
}

define internal i64 @thread_count() {
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %nctaid = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %ntid64 = zext i32 %ntid to i64
  %nctaid64 = zext i32 %nctaid to i64
  %count = mul i64 %ntid64, %nctaid64
  ret i64 %count
}

define ptx_kernel void @mneme_compare(ptr addrspace(1) %a, ptr addrspace(1) %b, i64 %begin,
                                      i64 %n, ptr addrspace(1) %count,
                                      ptr addrspace(1) %first) {
entry:
  %index = call i64 @thread_index()
  %start = add i64 %begin, %index
  %stride = call i64 @thread_count()
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

define ptx_kernel void @mneme_compare16(ptr addrspace(1) %a, ptr addrspace(1) %b, i64 %n16,
                                        ptr addrspace(1) %count, ptr addrspace(1) %first) {
entry:
  %start = call i64 @thread_index()
  %stride = call i64 @thread_count()
  br label %loop

loop:
  %i = phi i64 [ %start, %entry ], [ %next, %step ]
  %done = icmp uge i64 %i, %n16
  br i1 %done, label %exit, label %body

body:
  %pa = getelementptr <4 x i32>, ptr addrspace(1) %a, i64 %i
  %pb = getelementptr <4 x i32>, ptr addrspace(1) %b, i64 %i
  %va = load <4 x i32>, ptr addrspace(1) %pa, align 16
  %vb = load <4 x i32>, ptr addrspace(1) %pb, align 16
  %x = xor <4 x i32> %va, %vb
  %any = call i32 @llvm.vector.reduce.or.v4i32(<4 x i32> %x)
  %same = icmp eq i32 %any, 0
  br i1 %same, label %step, label %differ

differ:
  %bytes = bitcast <4 x i32> %x to <16 x i8>
  %ne = icmp ne <16 x i8> %bytes, zeroinitializer
  %mask = bitcast <16 x i1> %ne to i16
  %pop = call i16 @llvm.ctpop.i16(i16 %mask)
  %low = call i16 @llvm.cttz.i16(i16 %mask, i1 true)
  %pop64 = zext i16 %pop to i64
  %low64 = zext i16 %low to i64
  %offset = shl i64 %i, 4
  %at = add i64 %offset, %low64
  %c = atomicrmw add ptr addrspace(1) %count, i64 %pop64 monotonic
  %f = atomicrmw umin ptr addrspace(1) %first, i64 %at monotonic
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
        from mneme_cc.replay.llvm import llvm_binding

        drv = dev._driver()
        llvm = llvm_binding()
        module = llvm.parse_assembly(COMPARE_IR)
        machine = llvm.Target.from_triple(module.triple).create_target_machine(
            cpu=device.arch, opt=3)
        ptx = machine.emit_assembly(module)
        cubin = compile_cubin(ptx, BYTES, ReplayConfig(), device.arch)
        self.module = dev.check(drv.cuModuleLoadData(cubin.data), "loading the compare kernels")
        self.bytes, self.vectors = (
            dev.check(drv.cuModuleGetFunction(self.module, name.encode()),
                      "loading the compare kernels") for name in (BYTES, VECTORS))
        self.result = int(dev.check(drv.cuMemAlloc(16), "allocating"))
        self.stream = device.stream

    def _launch(self, function, *args: int, work: int) -> None:
        drv = dev._driver()
        values = [ctypes.c_uint64(v) for v in (*args, self.result, self.result + 8)]
        pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        blocks = max(1, min(4096, -(-work // 256)))
        dev.check(drv.cuLaunchKernel(function, blocks, 1, 1, 256, 1, 1, 0, self.stream,
                                     ctypes.addressof(pointers), 0), "comparing")

    def differing(self, a: int, b: int, size: int) -> tuple[int, int]:
        """(number of differing bytes, offset of the first) of [a, a+size) and [b, b+size)."""
        drv = dev._driver()
        init = (ctypes.c_uint64 * 2)(0, (1 << 64) - 1)
        dev.check(drv.cuMemcpyHtoD(self.result, ctypes.addressof(init), 16), "comparing")
        vectors = size // 16 if (a | b) % 16 == 0 else 0
        if vectors:
            self._launch(self.vectors, a, b, vectors, work=vectors)
        if vectors * 16 < size:
            self._launch(self.bytes, a, b, vectors * 16, size, work=size - vectors * 16)
        dev.check(drv.cuStreamSynchronize(self.stream), "comparing")
        out = (ctypes.c_uint64 * 2)()
        dev.check(drv.cuMemcpyDtoH(ctypes.addressof(out), self.result, 16), "comparing")
        return int(out[0]), int(out[1])

    def close(self) -> None:
        drv = dev._driver()
        drv.cuMemFree(self.result)
        drv.cuModuleUnload(self.module)
