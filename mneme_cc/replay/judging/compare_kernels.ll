; The compare kernels of verification (mneme_cc/replay/gpu_compare.py).
;
; Both add the number of differing bytes to count[0] and lower first[0] to
; the offset of the first. mneme_compare walks bytes [begin, n);
; mneme_compare16 walks n16 aligned 16-byte vectors (a GPU loads those at
; full bandwidth; a byte at a time it reached a tenth of it) and takes a
; differing vector apart only when it differs. Each thread keeps its own
; count and first, and each warp sums and lowers its threads' before one
; lane updates count and first: a buffer that differs everywhere (a
; configuration that changes the numerics) would otherwise make every
; vector's atomics queue on one address, milliseconds per buffer.

target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.laneid()
declare i32 @llvm.nvvm.shfl.sync.bfly.i32(i32, i32, i32, i32)
declare i32 @llvm.vector.reduce.or.v4i32(<4 x i32>)
declare i64 @llvm.umin.i64(i64, i64)
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

; The value of the lane `mask` lanes away (a butterfly step over the full warp).
define internal i64 @swap64(i64 %v, i32 %mask) {
  %lo = trunc i64 %v to i32
  %hi64 = lshr i64 %v, 32
  %hi = trunc i64 %hi64 to i32
  %olo = call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %lo, i32 %mask, i32 31)
  %ohi = call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %hi, i32 %mask, i32 31)
  %olo64 = zext i32 %olo to i64
  %ohi64 = zext i32 %ohi to i64
  %ohis = shl i64 %ohi64, 32
  %o = or i64 %ohis, %olo64
  ret i64 %o
}

; One butterfly step: the sum of the counts, the lower of the firsts.
define internal { i64, i64 } @combine(i64 %count, i64 %first, i32 %mask) {
  %oc = call i64 @swap64(i64 %count, i32 %mask)
  %of = call i64 @swap64(i64 %first, i32 %mask)
  %c = add i64 %count, %oc
  %f = call i64 @llvm.umin.i64(i64 %first, i64 %of)
  %r0 = insertvalue { i64, i64 } undef, i64 %c, 0
  %r1 = insertvalue { i64, i64 } %r0, i64 %f, 1
  ret { i64, i64 } %r1
}

; Every lane of every warp calls it (blocks are whole warps): the warp's
; total and first reach count and first through its lane 0.
define internal void @flush(i64 %count, i64 %first, ptr addrspace(1) %count_out,
                            ptr addrspace(1) %first_out) {
entry:
  %s16 = call { i64, i64 } @combine(i64 %count, i64 %first, i32 16)
  %c16 = extractvalue { i64, i64 } %s16, 0
  %f16 = extractvalue { i64, i64 } %s16, 1
  %s8 = call { i64, i64 } @combine(i64 %c16, i64 %f16, i32 8)
  %c8 = extractvalue { i64, i64 } %s8, 0
  %f8 = extractvalue { i64, i64 } %s8, 1
  %s4 = call { i64, i64 } @combine(i64 %c8, i64 %f8, i32 4)
  %c4 = extractvalue { i64, i64 } %s4, 0
  %f4 = extractvalue { i64, i64 } %s4, 1
  %s2 = call { i64, i64 } @combine(i64 %c4, i64 %f4, i32 2)
  %c2 = extractvalue { i64, i64 } %s2, 0
  %f2 = extractvalue { i64, i64 } %s2, 1
  %s1 = call { i64, i64 } @combine(i64 %c2, i64 %f2, i32 1)
  %c1 = extractvalue { i64, i64 } %s1, 0
  %f1 = extractvalue { i64, i64 } %s1, 1
  %lane = call i32 @llvm.nvvm.read.ptx.sreg.laneid()
  %first_lane = icmp eq i32 %lane, 0
  %differs = icmp ne i64 %c1, 0
  %writes = and i1 %first_lane, %differs
  br i1 %writes, label %write, label %done

write:
  %c = atomicrmw add ptr addrspace(1) %count_out, i64 %c1 monotonic
  %f = atomicrmw umin ptr addrspace(1) %first_out, i64 %f1 monotonic
  br label %done

done:
  ret void
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
  %i = phi i64 [ %start, %entry ], [ %next, %body ]
  %cnt = phi i64 [ 0, %entry ], [ %cnt.next, %body ]
  %fst = phi i64 [ -1, %entry ], [ %fst.next, %body ]
  %done = icmp uge i64 %i, %n
  br i1 %done, label %exit, label %body

body:
  %pa = getelementptr i8, ptr addrspace(1) %a, i64 %i
  %pb = getelementptr i8, ptr addrspace(1) %b, i64 %i
  %va = load i8, ptr addrspace(1) %pa, align 1
  %vb = load i8, ptr addrspace(1) %pb, align 1
  %differ = icmp ne i8 %va, %vb
  %one = zext i1 %differ to i64
  %cnt.next = add i64 %cnt, %one
  %at = select i1 %differ, i64 %i, i64 -1
  %fst.next = call i64 @llvm.umin.i64(i64 %fst, i64 %at)
  %next = add i64 %i, %stride
  br label %loop

exit:
  call void @flush(i64 %cnt, i64 %fst, ptr addrspace(1) %count, ptr addrspace(1) %first)
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
  %cnt = phi i64 [ 0, %entry ], [ %cnt.next, %step ]
  %fst = phi i64 [ -1, %entry ], [ %fst.next, %step ]
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
  %cnt.add = add i64 %cnt, %pop64
  %fst.low = call i64 @llvm.umin.i64(i64 %fst, i64 %at)
  br label %step

step:
  %cnt.next = phi i64 [ %cnt, %body ], [ %cnt.add, %differ ]
  %fst.next = phi i64 [ %fst, %body ], [ %fst.low, %differ ]
  %next = add i64 %i, %stride
  br label %loop

exit:
  call void @flush(i64 %cnt, i64 %fst, ptr addrspace(1) %count, ptr addrspace(1) %first)
  ret void
}
