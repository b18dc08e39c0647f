; ModuleID = '/work/main/tests/lit/capture-device-module.ll'
source_filename = "/work/main/tests/lit/capture-device-module.ll"
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@g_counter = addrspace(1) global i32 3, align 4
@c_table = addrspace(4) externally_initialized constant [4 x float] zeroinitializer, align 4
@.str = private addrspace(4) constant [2 x i8] c"x\00"
@blockIdx = extern_weak addrspace(1) global i32

define ptx_kernel void @_Z6kernelPi(ptr %p) #0 {
  store i32 1, ptr %p, align 4
  ret void
}

define void @_Z6helperv() #0 {
  ret void
}

attributes #0 = { "target-cpu"="sm_90" "target-features"="+ptx88,+sm_90" }
