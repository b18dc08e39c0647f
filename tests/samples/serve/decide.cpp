// Prints how the runtime's serving table (argv[1]) decides each launch read
// from stdin, one "KERNEL GX,GY,GZ BX,BY,BZ SMEM" per line, as
// "serve GX,GY,GZ BX,BY,BZ SMEM CUBIN" or "pass REASON": the tests compare
// it with the Python rules (mneme_cc/deploy/serving.py).  Every entry of a
// kernel is a candidate (the tests use one arch and the bundle's own IR).
#include "ServeTable.h"

#include <cstdio>
#include <iostream>
#include <string>

using namespace mneme::recorder;

static bool dims(const std::string &Text, dim3 &Out) {
  return std::sscanf(Text.c_str(), "%u,%u,%u", &Out.x, &Out.y, &Out.z) == 3;
}

int main(int Argc, char **Argv) {
  ServeTable Table;
  std::string Error;
  if (Argc != 2 || !Table.load(Argv[1], Error)) {
    std::printf("error %s\n", Error.c_str());
    return 1;
  }
  std::string Kernel, Grid, Block;
  unsigned long long Smem;
  while (std::cin >> Kernel >> Grid >> Block >> Smem) {
    Shape Launch;
    Launch.SharedMem = Smem;
    dims(Grid, Launch.Grid);
    dims(Block, Launch.Block);
    auto It = Table.Kernels.find(Kernel);
    if (It == Table.Kernels.end()) {
      std::printf("pass not tuned\n");
      continue;
    }
    ServeDecision D = Table.decide(It->second.Entries, Launch);
    if (!D.Entry) {
      std::printf("pass %s\n", D.Reason.c_str());
      continue;
    }
    const Shape &S = D.Launch;
    std::printf("serve %u,%u,%u %u,%u,%u %llu %s\n", S.Grid.x, S.Grid.y, S.Grid.z, S.Block.x,
                S.Block.y, S.Block.z, static_cast<unsigned long long>(S.SharedMem),
                D.Entry->Cubin.c_str());
  }
  return 0;
}
