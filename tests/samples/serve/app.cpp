// An application of the fake CUDA runtime: hands the runtime its embedded
// IR (a file, argv[1]) as a recordable binary's constructor would, registers
// two kernels and two device globals, and launches kern(float *, int) once per "GRID,BLOCK,SMEM,N"
// argument, then other() once.  Exits with FAKE_EXIT (default 0).
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

struct dim3 {
  unsigned x, y, z;
};

extern "C" {
void **__cudaRegisterFatBinary(void *);
void __cudaRegisterFatBinaryEnd(void **);
void __cudaRegisterFunction(void **, const char *, char *, const char *, int, void *, void *,
                            void *, void *, int *);
void __cudaRegisterVar(void **, char *, char *, const char *, int, size_t, int, int);
int cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, void *);
}

static void kern() {}
static char g_scale = 9, c_weights = 12; // host shadows of two device globals
static void other() {}

int main(int Argc, char **Argv) {
  static std::string IR;
  std::ifstream In(Argv[1], std::ios::binary);
  IR.assign(std::istreambuf_iterator<char>(In), std::istreambuf_iterator<char>());
  using Hook = void (*)(const void *, uint64_t);
  if (auto Register = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "__mneme_register_ir_v2")))
    Register(IR.data(), IR.size());
  int Wrapper[6] = {0};
  void **Handle = __cudaRegisterFatBinary(Wrapper);
  __cudaRegisterFunction(Handle, reinterpret_cast<const char *>(&kern),
                         const_cast<char *>("_Z4kernPfi"), "_Z4kernPfi", -1, nullptr, nullptr,
                         nullptr, nullptr, nullptr);
  __cudaRegisterFunction(Handle, reinterpret_cast<const char *>(&other),
                         const_cast<char *>("_Z5otherv"), "_Z5otherv", -1, nullptr, nullptr,
                         nullptr, nullptr, nullptr);
  __cudaRegisterVar(Handle, &g_scale, const_cast<char *>("g_scale"), "g_scale", 0, 4, 0, 0);
  __cudaRegisterVar(Handle, &c_weights, const_cast<char *>("c_weights"), "c_weights", 0, 28, 1,
                    0);
  __cudaRegisterFatBinaryEnd(Handle);
  float *Data = nullptr;
  for (int I = 2; I < Argc; ++I) {
    unsigned Grid, Block;
    size_t Smem;
    int N;
    if (std::sscanf(Argv[I], "%u,%u,%zu,%d", &Grid, &Block, &Smem, &N) != 4)
      return 2;
    void *Args[] = {&Data, &N};
    cudaLaunchKernel(reinterpret_cast<const void *>(&kern), dim3{Grid, 1, 1}, dim3{Block, 1, 1},
                     Args, Smem, nullptr);
  }
  int Zero = 0;
  void *Args[] = {&Data, &Zero};
  cudaLaunchKernel(reinterpret_cast<const void *>(&other), dim3{1, 1, 1}, dim3{32, 1, 1}, Args,
                   0, nullptr);
  const char *Exit = std::getenv("FAKE_EXIT");
  return Exit ? std::atoi(Exit) : 0;
}
