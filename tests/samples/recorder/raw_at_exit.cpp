// The writer at the application's exit: chunks not yet started when
// drain(.., Raw) is called are stored uncompressed, and counted.
// Usage: raw_at_exit DATABASE_DIR raw|wait  -> "<raw chunks> <raw bytes>"
#include "DatabaseWriter.h"

#include "mneme/SnapshotStore.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

using namespace mneme::recorder;

int main(int Argc, char **Argv) {
  if (Argc != 3)
    return 2;
  std::string Dir = Argv[1], Error;
  const bool Raw = std::strcmp(Argv[2], "raw") == 0;
  if (!mneme::store::initDatabase(Dir, Error))
    return 2;
  constexpr uint64_t Chunk = 64 << 10;
  constexpr int Chunks = 16;
  WriterStats Stats;
  {
    DatabaseWriter Writer(Dir, 3, 1);
    auto Job = std::make_unique<InstanceJob>();
    HostBuffer Buffer = allocateHostBuffer(Chunk * Chunks);
    // Compressible and distinct: chunk C holds the byte C.
    for (int C = 0; C < Chunks; ++C) {
      std::memset(Buffer.get() + C * Chunk, C, Chunk);
      Job->Chunks.push_back(ChunkTask{
          mneme::content_hash::hash(Buffer.get() + C * Chunk, Chunk), Buffer, C * Chunk,
          Chunk});
    }
    // Still on its way to the host when the application exits.
    Job->Fetches.push_back([](std::string &) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return true;
    });
    Job->Files = [](uint64_t) { return std::vector<OutputFile>{{"index/job", "{}", false}}; };
    Writer.submit(std::move(Job));
    Writer.drain(0, Raw);
    Stats = Writer.stats();
  }
  std::printf("%llu %llu\n", static_cast<unsigned long long>(Stats.RawAtExitChunks),
              static_cast<unsigned long long>(Stats.RawAtExitBytes));
  return 0;
}
