; The host pass embeds every record handed over for its TU in .mneme_ir,
; registers them through a constructor that looks the recorder's hook up
; with dlsym, and consumes the hand-off files.
; RUN: rm -rf %t && mkdir -p %t
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=tu2 %S/Inputs/device-sm_80.ll -disable-output
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=tu2 %S/Inputs/device-sm_90.ll -disable-output
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-embed -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=tu2 %s -S -o - | FileCheck %s
; RUN: ls %t | count 0

target triple = "x86_64-pc-linux-gnu"

define internal void @__cuda_module_ctor() {
  ret void
}

; CHECK: @__mneme_ir = private constant [{{[0-9]+}} x i8] c"MNEMEIR\00\02\00\00\00{{.*}}sm_80{{.*}}MNEMEIR\00\02\00\00\00{{.*}}sm_90{{.*}}", section ".mneme_ir", align 8
; CHECK: @llvm.used = appending global [1 x ptr] [ptr @__mneme_ir]
; CHECK: @__mneme_hook_name = private unnamed_addr constant [23 x i8] c"__mneme_register_ir_v2\00"
; CHECK: @llvm.global_ctors = appending global [1 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 101, ptr @__mneme_register_ir, ptr null }]
; CHECK: define internal void @__mneme_register_ir() {
; CHECK:   %[[HOOK:.*]] = call ptr @dlsym(ptr null, ptr @__mneme_hook_name)
; CHECK:   br i1 %{{.*}}, label %register, label %done
; CHECK: register:
; CHECK:   call void %[[HOOK]](ptr @__mneme_ir, i64 {{[0-9]+}})
