; A TU of relocatable device code that defines only __device__ functions
; leaves nothing CUDA in its host module; through the extension point (as
; clang runs it) its host job still embeds the records handed over for it.
; RUN: rm -rf %t && mkdir -p %t
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=lib %S/Inputs/device-sm_90.ll -disable-output
; RUN: opt -load-pass-plugin=%plugin -passes='default<O0>' -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=lib %s -S -o - | FileCheck %s
; RUN: ls %t | count 0

target triple = "x86_64-pc-linux-gnu"
source_filename = "library.cu"

define i32 @host_helper() {
  ret i32 0
}

; CHECK: @__mneme_ir = private constant {{.*}}sm_90{{.*}}, section ".mneme_ir"
; CHECK: define {{.*}}i32 @host_helper()
