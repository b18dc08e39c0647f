; Under -fgpu-rdc clang 22 renames a static __constant__ that host code
; names to `<name>__static__<id>` and leaves the kernel's uses on an
; undefined `<name>`; the device pass points them at the definition before
; it captures the module, so nvlink links it and replay reads the same IR.
; RUN: rm -rf %t && mkdir -p %t
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=tu %s -S -o - | FileCheck %s
; RUN: FileCheck %s --check-prefix=RECORD --input-file=%t/tu.sm_90.mnir

target triple = "nvptx64-nvidia-cuda"

@_ZL5coeff = external addrspace(4) global [4 x float], align 4
@_ZL5coeff__static__68a08e9351c23c1f = addrspace(4) externally_initialized constant [4 x float] zeroinitializer, align 4
@_ZL5other = external addrspace(1) global i32, align 4

define ptx_kernel void @_Z1kPf(ptr %o) #0 {
  %v = load float, ptr addrspacecast (ptr addrspace(4) @_ZL5coeff to ptr), align 4
  store float %v, ptr %o
  %w = load i32, ptr addrspace(1) @_ZL5other, align 4
  ret void
}

attributes #0 = { "target-cpu"="sm_90" }

; CHECK-NOT: @_ZL5coeff = external
; CHECK: @_ZL5other = external addrspace(1) global i32
; CHECK: load float, ptr addrspacecast (ptr addrspace(4) @_ZL5coeff__static__68a08e9351c23c1f to ptr)
; RECORD: "name":"_ZL5coeff__static__68a08e9351c23c1f"
