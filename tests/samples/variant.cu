// Compiled many times at once with -DVARIANT=N: each object must carry the
// IR of its own variant, never a neighbour's (the hand-off under `make -j`).
#define PASTE2(a, b) a##b
#define PASTE(a, b) PASTE2(a, b)

__global__ void PASTE(variant_, VARIANT)(int *out) { out[threadIdx.x] = VARIANT; }
