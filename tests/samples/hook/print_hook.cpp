// A stand-in recorder for tests: defines the registration hook and prints
// what each constructor hands it (decoded by the shared format code).
#include "mneme/EmbeddedIR.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

extern "C" void __mneme_register_ir_v2(const void *Data, uint64_t Size) {
  std::vector<mneme::embedded_ir::RecordView> Records;
  std::string Error;
  if (!mneme::embedded_ir::decodeRecords(Data, Size, Records, Error)) {
    std::fprintf(stderr, "hook: error: %s\n", Error.c_str());
    return;
  }
  for (const auto &R : Records)
    std::fprintf(stderr, "hook: %zu bytes of bitcode, metadata %.*s\n",
                 R.Bitcode.size(), static_cast<int>(R.Metadata.size()),
                 R.Metadata.data());
}
