// The writer's threads: none before the first job; every piece of every job
// fetched once, a job of few pieces fetched by one thread (thread k joins
// only while more than 2k pieces wait), many pieces spread over the threads.
// Usage: fetch_ranks DATABASE_DIR PIECES [CHUNKS]
//   -> "<fetched> <distinct threads> <fetch threads> <compressing threads> <threads started>"
// (the last three as the writer started them; PIECES 0 submits nothing; CHUNKS, 1 by
// default, distinct chunks of 4 KiB to store).
#include "DatabaseWriter.h"

#include "mneme/SnapshotStore.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <mutex>
#include <set>
#include <thread>

using namespace mneme::recorder;

namespace {
int processThreads() {
  int N = 0;
  if (DIR *D = opendir("/proc/self/task")) {
    while (dirent *E = readdir(D))
      N += E->d_name[0] != '.';
    closedir(D);
  }
  return N;
}
} // namespace

int main(int Argc, char **Argv) {
  if (Argc != 3 && Argc != 4)
    return 2;
  std::string Dir = Argv[1], Error;
  const int Pieces = std::atoi(Argv[2]), Chunks = Argc == 4 ? std::atoi(Argv[3]) : 1;
  if (!mneme::store::initDatabase(Dir, Error))
    return 2;
  std::mutex Lock;
  std::set<std::thread::id> Threads;
  int Fetched = 0, Started = 0;
  WriterStats Stats;
  const int Before = processThreads(); // the main thread and any a preloaded library runs
  {
    DatabaseWriter Writer(Dir, 1, 4);
    if (Pieces > 0) {
      auto Job = std::make_unique<InstanceJob>();
      HostBuffer Buffer = allocateHostBuffer(4096 * Chunks);
      for (int P = 0; P < Pieces; ++P)
        Job->Fetches.push_back([&](std::string &) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          std::lock_guard<std::mutex> G(Lock);
          Threads.insert(std::this_thread::get_id());
          ++Fetched;
          return true;
        });
      for (int C = 0; C < Chunks; ++C) {
        char *At = Buffer.get() + 4096 * C;
        std::memset(At, C, 4096);
        Job->Chunks.push_back(
            ChunkTask{mneme::content_hash::hash(At, 4096), Buffer, 4096ull * C, 4096});
      }
      Job->Files = [](uint64_t) { return std::vector<OutputFile>{{"index/job", "{}", false}}; };
      Writer.submit(std::move(Job));
      Writer.drain();
    }
    Started = processThreads() - Before;
    Stats = Writer.stats();
  }
  std::printf("%d %zu %u %u %d\n", Fetched, Threads.size(), Stats.FetchThreads,
              Stats.StoreThreads, Started);
  return 0;
}
