; The device pass writes one record per TU and arch to the hand-off
; directory: kernels, device globals (not private ones, not declarations)
; and the arch, and leaves the module itself untouched.
; RUN: rm -rf %t && mkdir -p %t
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=tu1 %s -S -o %t/out.ll
; RUN: FileCheck %s --check-prefix=RECORD --input-file=%t/tu1.sm_90.mnir
; RUN: FileCheck %s --check-prefix=MODULE --input-file=%t/out.ll
; RUN: ls %t | FileCheck %s --check-prefix=FILES

target triple = "nvptx64-nvidia-cuda"

@g_counter = addrspace(1) global i32 3, align 4
@c_table = addrspace(4) externally_initialized constant [4 x float] zeroinitializer, align 4
@.str = private addrspace(4) constant [2 x i8] c"x\00"
@blockIdx = extern_weak addrspace(1) global i32

define ptx_kernel void @_Z6kernelPi(ptr %p) #0 {
  store i32 1, ptr %p
  ret void
}

define void @_Z6helperv() #0 {
  ret void
}

attributes #0 = { "target-cpu"="sm_90" "target-features"="+ptx88,+sm_90" }

; RECORD: MNEMEIR
; The header before the JSON holds its length, which may contain a newline byte.
; RECORD: {"arch":"sm_90",
; RECORD-SAME: "globals":[{"constant":false,"demangled":"g_counter","name":"g_counter","size":4,"space":"global"},{"constant":true,"demangled":"c_table","name":"c_table","size":16,"space":"constant"}],
; RECORD-SAME: "kernels":[{"demangled":"kernel(int*)","name":"_Z6kernelPi"}],
; RECORD-SAME: "o0_attributes_removed":false,
; RECORD-SAME: "target_features":"+ptx88,+sm_90","triple":"nvptx64-nvidia-cuda"}
; RECORD-SAME: BC

; MODULE: define ptx_kernel void @_Z6kernelPi(ptr %p) #0 {
; MODULE-NOT: mneme

; FILES: out.ll
; FILES-NEXT: tu1.sm_90.mnir
; FILES-NOT: tmp
