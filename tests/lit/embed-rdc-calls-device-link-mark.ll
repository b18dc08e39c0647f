; The host module of relocatable device code calls, at start-up, the symbol
; only a device link defines (hidden), so a link that skips the device link
; fails; a whole-program module (it registers its own fatbinary) does not.
; RUN: rm -rf %t && mkdir -p %t
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=rdc %S/Inputs/device-sm_90.ll -disable-output
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-embed -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=rdc %s -S -o - | FileCheck %s
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=whole %S/Inputs/device-sm_90.ll -disable-output
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-embed -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=whole %S/Inputs/host-module.ll -S -o - | FileCheck %s --check-prefix=WHOLE

target triple = "x86_64-pc-linux-gnu"
source_filename = "rdc.cu"

%struct.__tgt_offload_entry = type { i64, i16, i16, i32, ptr, ptr, i64, i64, ptr }

@.offloading.entry_name = internal unnamed_addr constant [7 x i8] c"_Z1kPf\00", section ".llvm.rodata.offloading"
@.offloading.entry._Z1kPf = weak constant %struct.__tgt_offload_entry { i64 0, i16 1, i16 2, i32 0, ptr @_Z16__device_stub__kPf, ptr @.offloading.entry_name, i64 0, i64 0, ptr null }, section "llvm_offload_entries", align 8

define void @_Z16__device_stub__kPf(ptr %p) {
  ret void
}

; CHECK: define internal void @__mneme_register_ir()
; CHECK-NEXT: entry:
; CHECK: call void @__mneme_rdc_objects_need_a_device_link__link_with_mneme_nvcc_or_run_mneme_nvcc_dlink()
; CHECK: declare hidden void @__mneme_rdc_objects_need_a_device_link__link_with_mneme_nvcc_or_run_mneme_nvcc_dlink()
; WHOLE: define internal void @__mneme_register_ir()
; WHOLE-NOT: need_a_device_link
