// The serving table `mneme run --tuned` hands the runtime (MNEME_SERVE):
// what each tuned kernel's bundle entries are, already checked by Python
// (manifest, cubin digests; the cubins copied into a private directory),
// and how a launch is matched to one.  docs/deploy.md describes the file.
#ifndef MNEME_RECORDER_SERVE_TABLE_H
#define MNEME_RECORDER_SERVE_TABLE_H

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mneme::recorder {

struct Shape {
  dim3 Grid, Block;
  uint64_t SharedMem = 0;
};

bool operator<(const Shape &A, const Shape &B);
bool operator==(const Shape &A, const Shape &B);

// One bundle entry: a kernel at one recorded launch shape.
struct ServeEntry {
  std::string Kernel, Arch;
  // SHA-256 of the code it was tuned from: the recorded IR, or, for a
  // kernel without IR, the application's image (ImageDigest).
  std::string IRSha256;
  bool ImageDigest = false;
  std::string Cubin; // a path, or "!" and why the entry cannot serve (Python warned)
  Shape Recorded, Serve;
  bool SpecializeDims = false;
  // Arguments the cubin folded in as constants: index -> their bytes.
  std::vector<std::pair<unsigned, std::string>> Specialized;
};

// A kernel of the bundle: its entries.
struct ServeKernel {
  std::vector<const ServeEntry *> Entries;
};

// How one launch shape is served: an entry and its geometry, or why not.
struct ServeDecision {
  const ServeEntry *Entry = nullptr;
  Shape Launch;
  std::string Reason;
};

struct ServeTable {
  bool Nearest = false, TimeAll = false;
  std::string Report; // where the report goes at exit
  std::vector<ServeEntry> Entries;
  std::map<std::string, ServeKernel> Kernels; // by mangled name

  // Reads Path; false with Error on anything malformed.
  bool load(const std::string &Path, std::string &Error);
  // The entry among Candidates (same kernel, arch and IR) that serves this
  // launch, with the geometry to launch it with.
  ServeDecision decide(const std::vector<const ServeEntry *> &Candidates,
                       const Shape &Launch) const;
};

} // namespace mneme::recorder

#endif
