#include "DatabaseWriter.h"

#include "Options.h"

#include <algorithm>
#include <sched.h>
#include <chrono>
#include <system_error>
#include <sys/mman.h>
#include <unistd.h>

namespace mneme::recorder {
namespace {
// Host memory that may wait for the writer before recording blocks.
constexpr uint64_t MaxPendingBytes = 8ULL << 30;
// Threads copying staged snapshot bytes to the host: one thread's copies
// (and the first touch of the host buffers they fill) fall behind the
// compressing threads when an instance brings gigabytes.
constexpr unsigned MostFetchThreads = 4;

uint64_t nanosecondsSince(std::chrono::steady_clock::time_point T0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now() - T0)
      .count();
}
} // namespace

HostBuffer allocateHostBuffer(uint64_t Bytes) {
  constexpr uint64_t Large = 4ULL << 20;
  if (Bytes < Large)
    return HostBuffer(new char[Bytes ? Bytes : 1], std::default_delete<char[]>());
  void *P = mmap(nullptr, Bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (P == MAP_FAILED)
    throw std::bad_alloc();
  madvise(P, Bytes, MADV_HUGEPAGE);
  return HostBuffer(static_cast<char *>(P), [Bytes](char *Q) { munmap(Q, Bytes); });
}

DatabaseWriter::DatabaseWriter(std::string Dir, int ZstdLevel, unsigned Count,
                               unsigned IdleCount)
    : Directory(std::move(Dir)), Level(ZstdLevel), MostOrdinary(std::max(1u, Count)),
      MostIdle(IdleCount), MostFetch(std::min(MostFetchThreads, MostOrdinary)) {}

// Each thread a process has started costs its exit: on an H100, 21 idle
// writer threads lengthened the exit of a program that recorded nothing by
// about 15 ms, joined before the exit or not. So the writer starts its
// threads as the work needs them: none until the first instance, then one
// of each kind, then more while queued work outnumbers them.
bool DatabaseWriter::startFirstThreads() {
  try {
    Threads.emplace_back([this] { commitLoop(); });
    Threads.emplace_back([this] { fetchLoop(0); });
    ++FetchThreads;
    Threads.emplace_back([this] { compressLoop(false); });
    ++OrdinaryThreads, ++StoreThreads;
  } catch (const std::exception &E) {
    fail(std::string("cannot start its threads (") + E.what() + ")");
    return false;
  }
  return true;
}

// Past a process's thread limit the writer goes on with the threads it has.
void DatabaseWriter::grow() {
  if (Stopping || !Started)
    return;
  try {
    while (FetchThreads < MostFetch && ToFetch.size() > 2 * FetchThreads) {
      unsigned Rank = FetchThreads;
      Threads.emplace_back([this, Rank] { fetchLoop(Rank); });
      ++FetchThreads;
    }
    while (OrdinaryThreads < std::min<size_t>(MostOrdinary, Compressing + Tasks.size())) {
      Threads.emplace_back([this] { compressLoop(false); });
      ++OrdinaryThreads, ++StoreThreads;
    }
    while (OrdinaryThreads == MostOrdinary && IdleThreads < MostIdle &&
           Tasks.size() > OrdinaryThreads + IdleThreads) {
      Threads.emplace_back([this] { compressLoop(true); });
      ++IdleThreads, ++StoreThreads;
    }
  } catch (const std::exception &) {
    // Not asked again: the threads started are the most there will be.
    MostFetch = FetchThreads;
    MostOrdinary = OrdinaryThreads;
    MostIdle = IdleThreads;
  }
}

WriterStats DatabaseWriter::stats() const {
  std::lock_guard<std::mutex> G(Lock); // the thread counts grow as work comes
  return WriterStats{FetchNs / 1e9, StoreNs / 1e9, RawChunks, RawBytes, FetchThreads,
                     StoreThreads};
}

DatabaseWriter::~DatabaseWriter() {
  drain();
  {
    std::lock_guard<std::mutex> G(Lock);
    Stopping = true;
  }
  Changed.notify_all();
  for (std::thread &T : Threads)
    T.join();
}

void DatabaseWriter::submit(std::unique_ptr<InstanceJob> Job) {
  std::unique_lock<std::mutex> G(Lock);
  // Without its first threads the job could never be written: it is
  // dropped, as every later one (recording stops, the application goes on).
  if (!Started && !CannotStart)
    CannotStart = !(Started = startFirstThreads());
  if (CannotStart)
    return;
  Changed.wait(G, [&] { return PendingBytes < MaxPendingBytes || Jobs.empty(); });
  Job->Remaining = Job->Chunks.size();
  PendingBytes += Job->HostBytes;
  Job->FetchesLeft = Job->Fetches.size();
  if (Job->FetchesLeft) {
    for (size_t I = 0; I < Job->Fetches.size(); ++I)
      ToFetch.emplace_back(Job.get(), I);
  } else {
    Job->Fetched = true;
    for (size_t I = 0; I < Job->Chunks.size(); ++I)
      Tasks.emplace_back(Job.get(), I);
  }
  Jobs.push_back(std::move(Job));
  grow();
  G.unlock();
  Changed.notify_all();
}

void DatabaseWriter::drain(unsigned MoreThreads, bool Raw) {
  if (Raw)
    StoreRaw = true;
  std::unique_lock<std::mutex> G(Lock);
  if (!Tasks.empty() || !ToFetch.empty()) {
    MostOrdinary += MoreThreads;
    grow();
  }
  Changed.wait(G, [&] { return Jobs.empty(); });
}

void DatabaseWriter::fail(const std::string &Error) {
  if (!Failed.exchange(true))
    report("cannot write the record database: " + Error +
           "; recording stops, the application goes on");
}

// Thread Rank fetches only while more than 2 x Rank pieces wait, so that
// a small recording sets up one fetcher (a stream and pinned memory, about
// 1 ms of the driver's time alone, more beside other calls), not one per thread.
void DatabaseWriter::fetchLoop(unsigned Rank) {
  std::unique_lock<std::mutex> G(Lock);
  while (true) {
    Changed.wait(G, [&] { return Stopping || ToFetch.size() > 2 * Rank; });
    if (ToFetch.size() <= 2 * Rank)
      return; // stopping: the lower ranks take the rest
    auto [Job, Index] = ToFetch.front();
    ToFetch.pop_front();
    G.unlock();
    auto T0 = std::chrono::steady_clock::now();
    std::string Error;
    // Dropped here, unlocked: the last piece of a staged copy frees it as
    // soon as it is on the host, not when the instance is committed.
    auto Piece = std::move(Job->Fetches[Index]);
    if (!Failed && !Piece(Error))
      fail(Error);
    Piece = nullptr;
    FetchNs += nanosecondsSince(T0);
    G.lock();
    if (--Job->FetchesLeft > 0)
      continue;
    Job->Fetched = true;
    for (size_t I = 0; I < Job->Chunks.size(); ++I)
      Tasks.emplace_back(Job, I);
    grow();
    Changed.notify_all();
  }
}

void DatabaseWriter::compressLoop(bool Idle) {
  if (Idle) {
    // Allowed without privileges; where refused, the thread runs as the others.
    sched_param None = {};
    sched_setscheduler(0, SCHED_IDLE, &None);
  }
  std::unique_lock<std::mutex> G(Lock);
  while (true) {
    // An idle thread takes only chunks the ordinary threads cannot start
    // now: one starved by a busy processor then holds back no commit they
    // could have made.
    Changed.wait(G, [&] {
      return Stopping || Tasks.size() > (Idle ? OrdinaryThreads : 0);
    });
    if (Tasks.empty())
      return;
    auto [Job, Index] = Tasks.front();
    Tasks.pop_front();
    ++Compressing;
    G.unlock();
    const ChunkTask &T = Job->Chunks[Index];
    uint64_t Stored = 0;
    std::string Error;
    auto T0 = std::chrono::steady_clock::now();
    bool Raw = StoreRaw && Level != 0;
    if (!Failed &&
        !store::writeChunk(Directory, T.Hash, T.Buffer.get() + T.Offset, T.Size,
                           Raw ? 0 : Level, Stored, Error))
      fail(Error);
    if (Raw && Stored) {
      ++RawChunks;
      RawBytes += Stored;
    }
    StoreNs += nanosecondsSince(T0);
    Job->StoredBytes += Stored;
    G.lock();
    --Compressing;
    if (--Job->Remaining == 0)
      Changed.notify_all();
  }
}

void DatabaseWriter::commitLoop() {
  std::unique_lock<std::mutex> G(Lock);
  while (true) {
    Changed.wait(G, [&] {
      return (Stopping && Jobs.empty()) ||
             (!Jobs.empty() && Jobs.front()->Fetched && Jobs.front()->Remaining == 0);
    });
    if (Jobs.empty())
      return;
    InstanceJob *Job = Jobs.front().get();
    G.unlock();
    if (!Failed) {
      bool Ok = true;
      for (const OutputFile &F : Job->Files(Job->StoredBytes)) {
        std::string Error;
        if (!store::writeFileAtomic(Directory + "/" + F.Path, F.Data, Error, F.Exclusive) &&
            !Error.empty()) {
          fail(Error);
          Ok = false;
          break;
        }
      }
      if (Ok) {
        ++Committed;
        for (const std::string &Path : Job->RemoveAfter)
          unlink((Directory + "/" + Path).c_str());
      }
    }
    G.lock();
    PendingBytes -= Job->HostBytes;
    Jobs.pop_front();
    Changed.notify_all();
  }
}

} // namespace mneme::recorder
