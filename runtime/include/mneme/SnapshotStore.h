// The snapshot store of a record database: content-addressed chunk files and
// the device-state manifests that reference them.
//
//   chunks/<2 hex>/<32 hex>   one chunk: header + raw or zstd payload
//   DeviceState.*.mneme       a manifest: regions of device memory, each a
//                             list of (chunk index, content hash)
//
// A prologue lists every chunk of every region; an epilogue lists only the
// chunks that changed.  Every file carries a magic, a format version and a
// checksum, and is written to a temporary name and renamed, so a reader
// sees a whole file or none.  The layout is specified in docs/record-db.md;
// change it only together with FormatVersion.
#ifndef MNEME_SNAPSHOT_STORE_H
#define MNEME_SNAPSHOT_STORE_H

#include "mneme/ContentHash.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mneme::store {

using content_hash::Digest;

inline constexpr uint32_t FormatVersion = 1;
inline constexpr char ChunkMagic[8] = {'M', 'N', 'E', 'M', 'E', 'C', 'K', '\0'};
inline constexpr char StateMagic[8] = {'M', 'N', 'E', 'M', 'E', 'S', 'T', '\0'};
inline constexpr size_t ChunkHeaderSize = 56;
inline constexpr size_t StateHeaderSize = 32;
inline constexpr uint64_t DefaultChunkSize = 1 << 20;

enum class Codec : uint32_t { Raw = 0, Zstd = 1 };

enum class StateKind : uint32_t { Prologue = 1, Epilogue = 2, Image = 3 };

enum class RegionKind : uint32_t {
  Allocation = 0, // a live device allocation in the VA window
  Global = 1,     // a device global of the kernel's module
  Arguments = 2,  // the packed kernel parameter buffer
  Image = 3,      // the application's compiled image (a fatbinary)
};

struct ChunkRef {
  uint64_t Index; // chunk number within the region
  Digest Hash;
};

struct Region {
  RegionKind Kind = RegionKind::Allocation;
  std::string Name;
  uint64_t Address = 0;
  uint64_t Size = 0;
  std::vector<ChunkRef> Chunks;
};

struct State {
  StateKind Kind = StateKind::Prologue;
  uint64_t ChunkSize = DefaultChunkSize;
  std::string Metadata; // UTF-8 JSON object describing the launch
  std::vector<Region> Regions;
};

// Number of chunks of a region of Size bytes.
inline uint64_t chunkCount(uint64_t Size, uint64_t ChunkSize) {
  return (Size + ChunkSize - 1) / ChunkSize;
}

// "chunks/ab/<hex>" relative to the database directory.
std::string chunkPath(const Digest &Hash);

// Writes the chunk unless the database already holds it.  Compresses with
// zstd at Level (0: store raw); keeps the raw bytes when compression does
// not pay.  StoredBytes is the file's size, or 0 when it already existed.
bool writeChunk(const std::string &DbDir, const Digest &Hash, const void *Data,
                size_t Size, int Level, uint64_t &StoredBytes, std::string &Error);

// Compresses a chunk stored raw (a recording's exit stores what is still
// queued that way) at Level, in place through a rename, so a reader sees
// the old file or the new one.  Before and After are the file's sizes; a
// chunk compressed already is left as it is.  The chunk is verified first.
bool compactChunk(const std::string &DbDir, const Digest &Hash, int Level, uint64_t &Before,
                  uint64_t &After, std::string &Error);

// Reads and verifies a chunk (header, payload checksum, content hash).
bool readChunk(const std::string &DbDir, const Digest &Hash, std::string &Out,
               std::string &Error);

std::string encodeState(const State &S);
bool decodeState(std::string_view Data, State &Out, std::string &Error);

// Reads and decodes a manifest; errors name the file.
bool readStateFile(const std::string &Path, State &Out, std::string &Error);

// Writes Data to Path through a temporary file in the same directory and a
// rename.  With Exclusive, an existing Path is kept and false returned with
// Error empty.
bool writeFileAtomic(const std::string &Path, std::string_view Data,
                     std::string &Error, bool Exclusive = false);

bool readFile(const std::string &Path, std::string &Out, std::string &Error);

// mkdir -p.
bool makeDirectories(const std::string &Path, std::string &Error);

// The content of a database's `database.json` (its format and version).
std::string databaseMarker();

// Creates or opens a record database: DIR/index, DIR/chunks and
// DIR/database.json (the first process to get there writes it).  False,
// naming the file, when DIR cannot be written or holds another version.
bool initDatabase(const std::string &Dir, std::string &Error);

} // namespace mneme::store

#endif
