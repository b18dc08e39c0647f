; Through the extension point (as clang runs it), a module that is neither
; NVPTX nor a CUDA host module is not touched, at -O0 and -O2.
; RUN: opt -load-pass-plugin=%plugin -passes='default<O0>' %s -S -o - | FileCheck %s
; RUN: opt -load-pass-plugin=%plugin -passes='default<O2>' %s -S -o - | FileCheck %s

target triple = "x86_64-pc-linux-gnu"

define i32 @main() {
  ret i32 0
}

; CHECK-NOT: mneme
; CHECK: define {{.*}}i32 @main()
; CHECK-NOT: mneme
