// StagingMemory against a fake driver whose cuMemAlloc hands out addresses
// from a counter and can be told to fail: what is reused, freed and kept.
#include "StagingMemory.h"

#include "CudaApi.h"

#include <cstdio>
#include <cstdlib>
#include <set>

namespace {
std::set<CUdeviceptr> Live;
CUdeviceptr Next = 0x1000;
int FailAllocs = 0; // the next this many allocations fail

CUresult fakeAlloc(CUdeviceptr *P, size_t) {
  if (FailAllocs > 0) {
    --FailAllocs;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *P = Next;
  Next += 0x1000;
  Live.insert(*P);
  return CUDA_SUCCESS;
}

CUresult fakeFree(CUdeviceptr P) {
  if (!Live.erase(P)) {
    std::printf("FAIL: freed %llx, which is not live\n", static_cast<unsigned long long>(P));
    std::exit(1);
  }
  return CUDA_SUCCESS;
}

void expect(bool Ok, const char *What) {
  if (!Ok) {
    std::printf("FAIL: %s\n", What);
    std::exit(1);
  }
}
} // namespace

namespace mneme::recorder {
const Driver &driver() {
  static Driver D = [] {
    Driver F;
    F.MemAlloc = fakeAlloc;
    F.MemFree = fakeFree;
    F.Loaded = true;
    return F;
  }();
  return D;
}
} // namespace mneme::recorder

int main() {
  using mneme::recorder::StagingMemory;
  const uint64_t MiB = 1 << 20, Limit = 100 * MiB;
  StagingMemory S;
  CUdeviceptr A, B, C, D;
  expect(S.take(10 * MiB, Limit, A) && S.take(40 * MiB, Limit, B), "two blocks");
  expect(!S.give(A), "another block still in use");
  expect(S.take(8 * MiB, Limit, C) && C == A, "an unused block that fits is reused");
  expect(S.take(8 * MiB, Limit, D) && D != A && D != B, "a block in use is not handed out");
  S.give(B);
  CUdeviceptr E;
  expect(S.take(15 * MiB, Limit, E) && E != B, "a block over twice the size is not used");
  S.give(C);
  S.give(C); // twice: ignored
  CUdeviceptr F, G;
  expect(S.take(9 * MiB, Limit, F) && F == C, "given back once");
  expect(S.take(9 * MiB, Limit, G) && G != C, "not twice");
  // In use: D 8, E 15, F 10, G 9 (42 MiB); unused: B 40.  50 more fit only
  // once B is freed: the largest unused first, and only what makes room.
  CUdeviceptr H;
  expect(S.take(50 * MiB, Limit, H) && !Live.count(B), "an unused block freed to make room");
  expect(!S.take(20 * MiB, Limit, A), "nothing unused left to free: over the limit");
  S.give(H);
  S.give(D);
  S.give(E);
  size_t Before = Live.size();
  S.trim(20 * MiB); // at most 20 MiB unused kept: H (50) and E (15) go, D (8) stays
  expect(Live.size() == Before - 2, "trim frees the largest unused down to what it keeps");
  FailAllocs = 1; // the device is full: unused blocks go, then the retry succeeds
  CUdeviceptr J;
  expect(S.take(30 * MiB, Limit, J), "an allocation retried after freeing the unused");
  expect(Live.size() == 3, "only the blocks in use are left");
  S.reset();
  expect(Live.size() == 3, "a reset frees no block in use");
  S.give(F); // a block from before the reset: ignored
  CUdeviceptr K;
  expect(S.take(5 * MiB, Limit, K) && K != F, "a block from before the reset is not reused");
  expect(S.give(K), "the last block in use given back");
  std::printf("ok\n");
  return 0;
}
