; A CUDA host module (it registers kernels), for the embedding tests.
target triple = "x86_64-pc-linux-gnu"

define internal void @__cuda_module_ctor() {
  ret void
}
