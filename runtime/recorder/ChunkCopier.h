// Copies the chunks of a snapshot that the database lacks off the device.
// While the application waits they are copied device-to-device (fast),
// within a staging budget, and reach their host buffers later on the
// writer's fetch thread; past the budget they are copied to the host at
// once.  Consecutive chunks travel together.
#ifndef MNEME_RECORDER_CHUNK_COPIER_H
#define MNEME_RECORDER_CHUNK_COPIER_H

#include "DatabaseWriter.h"
#include "DeviceSnapshot.h"
#include "StagingMemory.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mneme::recorder {

class InstanceWriter;

// A range of device memory in a snapshot: an allocation or a global.
struct SnapshotRegion {
  store::RegionKind Kind;
  std::string Name;
  uint64_t Address, Size;
};

// A device-side copy of snapshot bytes on their way to a host buffer.
struct StagedCopy {
  CUdeviceptr Copy;
  uint64_t Bytes;
  HostBuffer Buffer;
};

class ChunkCopier {
public:
  // From stages and copies; Into tells which chunks the database lacks.
  ChunkCopier(DeviceSnapshot &From, InstanceWriter &Into) : Snapshot(From), Database(Into) {}
  void setStagingCap(uint64_t Bytes) { StagingCap = Bytes; }
  // The context the fetch thread works in.
  void setContext(CUcontext C) { Context = C; }
  // Before a device reset (the writer drained): the fetch threads'
  // snapshots and the staging memory go.
  void reset();
  // Frees the staging memory no copy holds.
  void trimStaging() { Staging.trim(); }

  // Adds the chunks of Regions the database lacks to Job (only the chunks
  // Changed marks, when given); their device-side copies go to Staged.
  bool copy(const std::vector<SnapshotRegion> &Regions,
            const std::vector<std::vector<Digest>> &Digests,
            const std::vector<std::vector<bool>> *Changed, InstanceJob &Job,
            std::vector<StagedCopy> &Staged, std::string &Error);
  // Frees copies that will not be fetched (the instance was abandoned).
  void unstage(const std::vector<StagedCopy> &Staged);
  // The writer's work for staged copies: pieces that copy them to their
  // host buffers, each on any of its fetch threads; a copy is freed once
  // its last piece is gone.
  void fetches(const std::vector<StagedCopy> &Staged,
               std::vector<std::function<bool(std::string &Error)>> &Out);

  uint64_t copiedBytes() const { return CopiedBytes; }
  uint64_t copyRuns() const { return CopyRuns; }
  // The fetch threads' time making their streams and pinned buffers.
  double fetcherSetupSeconds() const { return FetcherSetupNs / 1e9; }
  unsigned fetchers() const { return FetchersMade; }

private:
  std::vector<bool> missing(const std::vector<Digest> &Digests,
                            const std::vector<bool> *Changed);
  // Chunks [First, End) of a region, which lie next to each other.
  bool copyRun(const SnapshotRegion &Region, const std::vector<Digest> &Digests, size_t First,
               size_t End, InstanceJob &Job, std::vector<StagedCopy> &Staged,
               std::string &Error);

  // On a fetch thread: Bytes of a staged copy into host memory.
  bool fetchPiece(CUdeviceptr From, uint64_t Bytes, char *To, std::string &Error);
  void releaseStaged(CUdeviceptr Copy);

  DeviceSnapshot &Snapshot;
  StagingMemory Staging;
  InstanceWriter &Database;
  std::mutex FetchersLock;
  std::vector<std::unique_ptr<DeviceSnapshot>> IdleFetchers; // one per fetch thread at most
  CUcontext Context = nullptr;
  uint64_t StagingCap = 0; // the staging memory's limit
  uint64_t CopiedBytes = 0, CopyRuns = 0;
  std::atomic<uint64_t> FetcherSetupNs{0};
  std::atomic<unsigned> FetchersMade{0};
};

} // namespace mneme::recorder

#endif
