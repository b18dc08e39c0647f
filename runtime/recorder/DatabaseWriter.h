// Writes recorded instances into the record database in the background, so
// compression and file I/O overlap the application's own work.
//
// An instance is committed in a fixed order: its chunks (in parallel), then
// its files (manifests, kernel description), then its index entry last.  A
// crash therefore loses at most the instances still in flight; whatever the
// index lists is complete.
#ifndef MNEME_RECORDER_DATABASE_WRITER_H
#define MNEME_RECORDER_DATABASE_WRITER_H

#include "mneme/SnapshotStore.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mneme::recorder {

// Bytes copied from the device, shared by the chunks cut from them.
using HostBuffer = std::shared_ptr<char>;

// Uninitialised host memory (large buffers on huge pages where the kernel
// offers them: snapshots copy gigabytes, and page faults would dominate).
HostBuffer allocateHostBuffer(uint64_t Bytes);

struct ChunkTask {
  store::Digest Hash;
  HostBuffer Buffer;
  uint64_t Offset = 0, Size = 0;
};

struct OutputFile {
  std::string Path; // relative to the database
  std::string Data;
  bool Exclusive = false; // keep an existing file (identical by construction)
};

struct InstanceJob {
  std::vector<ChunkTask> Chunks;
  // Produces the files to write once the chunks are stored, given the bytes
  // the chunks added; the last file is the index entry.
  std::function<std::vector<OutputFile>(uint64_t StoredBytes)> Files;
  std::vector<std::string> RemoveAfter; // e.g. the instance's claim
  // Fill the chunks' host buffers (from device staging) before they are
  // compressed, each on one of the writer's fetch threads, in any order.
  // None: already filled.
  std::vector<std::function<bool(std::string &Error)>> Fetches;
  uint64_t HostBytes = 0; // memory held until written
  // Filled by the writer.
  std::atomic<uint64_t> Remaining{0}, StoredBytes{0};
  size_t FetchesLeft = 0;
  bool Fetched = false;
};

// Where the writer's threads spent their time (summed over threads).
struct WriterStats {
  double FetchSeconds = 0, StoreSeconds = 0;
  uint64_t RawAtExitChunks = 0, RawAtExitBytes = 0; // left uncompressed by drain(.., Raw)
  unsigned FetchThreads = 0, StoreThreads = 0;
};

class DatabaseWriter {
public:
  // At most Threads compressing threads, and IdleThreads more that run only
  // where a processor would otherwise idle (SCHED_IDLE): they use what the
  // application leaves without taking from it, while the first Threads
  // keep the writer going when it leaves nothing. Threads start with the
  // first job and as queued work outnumbers them.
  DatabaseWriter(std::string Directory, int ZstdLevel, unsigned Threads,
                 unsigned IdleThreads = 0);
  ~DatabaseWriter(); // waits for everything submitted
  // Queues an instance; blocks while too much host memory is pending.
  void submit(std::unique_ptr<InstanceJob> Job);
  // Waits for every job submitted; where chunks are still queued, up to
  // MoreThreads more compressing threads may start for them first (the
  // writer keeps them for later jobs).
  // Raw: chunks not yet started are stored uncompressed (writing them
  // takes a fraction of compressing them; `mneme compact` compresses them
  // later).
  void drain(unsigned MoreThreads = 0, bool Raw = false);
  bool failed() const { return Failed; }
  uint64_t committed() const { return Committed; }
  WriterStats stats() const;

private:
  bool startFirstThreads(); // with Lock held: a commit, a fetch and a compressing thread
  void grow();              // with Lock held: more threads where queued work waits
  void fetchLoop(unsigned Rank);
  void compressLoop(bool Idle = false);
  void commitLoop();
  void fail(const std::string &Error);

  std::string Directory;
  const int Level;
  std::atomic<bool> StoreRaw{false};
  mutable std::mutex Lock;
  std::condition_variable Changed;
  std::deque<std::pair<InstanceJob *, size_t>> Tasks; // (job, chunk index)
  std::deque<std::unique_ptr<InstanceJob>> Jobs;      // committed in order
  std::deque<std::pair<InstanceJob *, size_t>> ToFetch; // (job, fetch index)
  uint64_t PendingBytes = 0;
  bool Stopping = false;
  std::atomic<bool> Failed{false};
  std::atomic<uint64_t> Committed{0};
  std::atomic<uint64_t> FetchNs{0}, StoreNs{0}, RawChunks{0}, RawBytes{0};
  // Threads at most, and started (OrdinaryThreads: compressing, not idle).
  unsigned MostOrdinary, MostIdle, MostFetch;
  unsigned FetchThreads = 0, StoreThreads = 0, OrdinaryThreads = 0, IdleThreads = 0;
  size_t Compressing = 0; // chunks being stored now
  bool Started = false, CannotStart = false;
  std::vector<std::thread> Threads;
};

} // namespace mneme::recorder

#endif
