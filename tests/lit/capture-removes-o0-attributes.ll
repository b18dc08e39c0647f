; clang -O0 marks every function optnone noinline.  The captured copy drops
; both so replay can optimise it; the module being compiled keeps them.
; RUN: rm -rf %t && mkdir -p %t
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=o0 %s -S -o - | FileCheck %s --check-prefix=MODULE
; RUN: FileCheck %s --check-prefix=RECORD --input-file=%t/o0.sm_80.mnir

target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @k(ptr %p) #0 {
  store i32 1, ptr %p
  ret void
}

attributes #0 = { noinline optnone "target-cpu"="sm_80" }

; MODULE: attributes #0 = { noinline optnone "target-cpu"="sm_80" }
; RECORD: "o0_attributes_removed":true
