; The compare kernels of verification (mneme_cc/replay/gpu_compare.py).
;
; Both add the number of differing bytes to count[0] and lower first[0] to
; the offset of the first. mneme_compare walks bytes [begin, n);
; mneme_compare16 walks n16 aligned 16-byte vectors (a GPU loads those at
; full bandwidth; a byte at a time it reached a tenth of it) and takes a
; differing vector apart only when it differs.

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
