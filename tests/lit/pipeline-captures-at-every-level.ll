; Through the extension point, the device module is captured before any
; optimisation, at every level: the record holds the unoptimised store.
; RUN: rm -rf %t && mkdir -p %t
; RUN: opt -load-pass-plugin=%plugin -passes='default<O0>' -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=o0 %s -disable-output
; RUN: opt -load-pass-plugin=%plugin -passes='default<O3>' -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=o3 %s -disable-output
; RUN: ls %t | FileCheck %s

target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @k(ptr %p) #0 {
  %a = alloca i32
  store i32 5, ptr %a
  %v = load i32, ptr %a
  store i32 %v, ptr %p
  ret void
}

attributes #0 = { "target-cpu"="sm_90" }

; CHECK: o0.sm_90.mnir
; CHECK-NEXT: o3.sm_90.mnir
