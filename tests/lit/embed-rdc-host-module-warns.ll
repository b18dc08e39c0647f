; The host module of relocatable device code (-fgpu-rdc) has no CUDA
; registration, only offload entries; it is still a CUDA host module, and
; one with nothing handed over draws the warning.
; RUN: rm -rf %t && mkdir -p %t
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-embed -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=none %s -S -o %t/out.ll 2>&1 | FileCheck %s
; RUN: not grep mneme_ir %t/out.ll

target triple = "x86_64-pc-linux-gnu"
source_filename = "rdc.cu"

%struct.__tgt_offload_entry = type { i64, i16, i16, i32, ptr, ptr, i64, i64, ptr }

@.offloading.entry_name = internal unnamed_addr constant [7 x i8] c"_Z1kPf\00", section ".llvm.rodata.offloading"
@.offloading.entry._Z1kPf = weak constant %struct.__tgt_offload_entry { i64 0, i16 1, i16 2, i32 0, ptr @_Z16__device_stub__kPf, ptr @.offloading.entry_name, i64 0, i64 0, ptr null }, section "llvm_offload_entries", align 8

define void @_Z16__device_stub__kPf(ptr %p) {
  ret void
}

; CHECK: warning: mneme: no device IR was handed over for rdc.cu; this object carries none
