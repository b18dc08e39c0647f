; The record describes the build's floating-point code generation.  Run by
; opt (no cc1 command line), the contraction mode comes from the module's
; instructions, the level from the pipeline, denormal flushing from the
; attributes and the reflect answers from the module flags.
; RUN: rm -rf %t && mkdir -p %t
; RUN: opt -load-pass-plugin=%plugin -passes='default<O2>' -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=fast %s -disable-output
; RUN: FileCheck %s --check-prefix=FAST --input-file=%t/fast.sm_90.mnir
; RUN: sed -e 's/fmul contract/fmul/' -e 's/fadd contract float %m, %c/call float @llvm.fmuladd.f32(float %a, float %b, float %c)/' %s > %t/on.ll
; RUN: opt -load-pass-plugin=%plugin -passes=mneme-capture -mneme-handoff-dir=%t \
; RUN:     -mneme-handoff-key=on %t/on.ll -disable-output
; RUN: FileCheck %s --check-prefix=ON --input-file=%t/on.sm_90.mnir

target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @_Z1kPffff(ptr %p, float %a, float %b, float %c) #0 {
  %m = fmul contract float %a, %b
  %s = fadd contract float %m, %c
  store float %s, ptr %p
  ret void
}

declare float @llvm.fmuladd.f32(float, float, float)

attributes #0 = { "denormal-fp-math-f32"="preserve-sign,preserve-sign" "target-cpu"="sm_90" }

!llvm.module.flags = !{!0}
!0 = !{i32 4, !"nvvm-reflect-ftz", i32 1}

; FAST: "codegen":{"approx_func":false,"approx_transcendentals":null,
; FAST-SAME: "denormals_f32":"preserve-sign","denormals_f64":"ieee",
; FAST-SAME: "fp_contract":"fast",
; FAST-SAME: "ftz":true,
; FAST-SAME: "opt_level":"2",
; FAST-SAME: "reflect":{"__CUDA_FTZ":1,"__CUDA_PREC_SQRT":0},
; FAST-SAME: "source":"module"

; ON: "fp_contract":"on",
; ON-SAME: "opt_level":null,
