// End to end through mneme-cxx and clang: one record per arch, both in the
// object, named by `mneme inspect`.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %mneme-cxx --cuda-gpu-arch=sm_80 --cuda-gpu-arch=sm_90 -O0 -c %s -o %t/k.o
// RUN: %mneme inspect --json %t/k.o | FileCheck %s

__device__ int d_value;
__constant__ double c_scale[2];

template <int N> __global__ void fill(int *out) { out[threadIdx.x] = N + d_value; }
template __global__ void fill<3>(int *);

// CHECK: "arch": "sm_80"
// CHECK: "name": "_Z4fillILi3EEvPi"
// CHECK-NEXT: "demangled": "void fill<3>(int*)"
// CHECK: "name": "d_value"
// CHECK: "size": 4
// CHECK: "name": "c_scale"
// CHECK: "size": 16
// CHECK-NEXT: "space": "constant"
// CHECK: "arch": "sm_90"
