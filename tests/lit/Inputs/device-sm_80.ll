; A device module for sm_80 (input to other tests).
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @k(ptr %p) #0 {
  store i32 80, ptr %p
  ret void
}

attributes #0 = { "target-cpu"="sm_80" }
