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
    : Directory(std::move(Dir)), Level(ZstdLevel) {
  Count = std::max(1u, Count);
  FetchThreads = std::min(MostFetchThreads, Count);
  addCompressThreads(Count, /*Idle=*/false);
  addCompressThreads(IdleCount, /*Idle=*/true);
  for (unsigned I = 0; I < FetchThreads; ++I)
    Threads.emplace_back([this, I] { fetchLoop(I); });
  Threads.emplace_back([this] { commitLoop(); });
}

// Past a process's thread limit the writer goes on with the threads it has
// (at exit an exception would abort the application).
void DatabaseWriter::addCompressThreads(unsigned Count, bool Idle) {
  for (unsigned I = 0; I < Count; ++I) {
    try {
      Threads.emplace_back([this, Idle] { compressLoop(Idle); });
    } catch (const std::system_error &) {
      return;
    }
    ++StoreThreads;
    if (!Idle) // read by the idle threads (under Lock), which start after these
      ++OrdinaryThreads;
  }
}

WriterStats DatabaseWriter::stats() const {
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
  G.unlock();
  Changed.notify_all();
}

void DatabaseWriter::drain(unsigned MoreThreads, bool Raw) {
  if (Raw)
    StoreRaw = true;
  std::unique_lock<std::mutex> G(Lock);
  if (!Tasks.empty() || !ToFetch.empty())
    addCompressThreads(MoreThreads, /*Idle=*/false);
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
