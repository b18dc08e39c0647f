; A CUDA host module with nothing handed over (e.g. --cuda-host-only)
; builds, with a warning that the object carries no IR.
; RUN: rm -rf %t && mkdir -p %t
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-embed -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=none %s -S -o %t/out.ll 2>&1 | FileCheck %s
; RUN: not grep mneme_ir %t/out.ll

target triple = "x86_64-pc-linux-gnu"
source_filename = "lonely.cu"

define internal void @__cuda_register_globals(ptr %h) {
  ret void
}

; CHECK: warning: mneme: no device IR was handed over for lonely.cu; this object carries none
