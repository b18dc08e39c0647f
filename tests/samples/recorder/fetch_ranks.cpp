// The writer's fetch threads: every piece of every job fetched once, a job
// of few pieces fetched by one thread (thread k joins only while more than
// 2k pieces wait), many pieces spread over the threads.
// Usage: fetch_ranks DATABASE_DIR PIECES  -> "<fetched> <distinct threads>"
#include "DatabaseWriter.h"

#include "mneme/SnapshotStore.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

using namespace mneme::recorder;

int main(int Argc, char **Argv) {
  if (Argc != 3)
    return 2;
  std::string Dir = Argv[1], Error;
  const int Pieces = std::atoi(Argv[2]);
  if (!mneme::store::initDatabase(Dir, Error))
    return 2;
  std::mutex Lock;
  std::set<std::thread::id> Threads;
  int Fetched = 0;
  {
    DatabaseWriter Writer(Dir, 1, 4);
    auto Job = std::make_unique<InstanceJob>();
    HostBuffer Buffer = allocateHostBuffer(4096);
    for (int P = 0; P < Pieces; ++P)
      Job->Fetches.push_back([&](std::string &) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::lock_guard<std::mutex> G(Lock);
        Threads.insert(std::this_thread::get_id());
        ++Fetched;
        return true;
      });
    Job->Chunks.push_back(ChunkTask{mneme::content_hash::hash(Buffer.get(), 4096), Buffer, 0,
                                    4096});
    Job->Files = [](uint64_t) { return std::vector<OutputFile>{{"index/job", "{}", false}}; };
    Writer.submit(std::move(Job));
    Writer.drain();
  }
  std::printf("%d %zu\n", Fetched, Threads.size());
  return 0;
}
