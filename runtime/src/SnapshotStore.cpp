#include "mneme/SnapshotStore.h"

#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/uio.h>
#include <vector>
#include <sys/stat.h>
#include <unistd.h>

namespace mneme::store {
namespace {

// Little-endian field writers and a bounds-checked reader.
void put32(std::string &Out, uint32_t V) { Out.append(reinterpret_cast<const char *>(&V), 4); }
void put64(std::string &Out, uint64_t V) { Out.append(reinterpret_cast<const char *>(&V), 8); }
void pad8(std::string &Out) { Out.append((8 - Out.size() % 8) % 8, '\0'); }

struct Reader {
  std::string_view Data;
  size_t Pos = 0;
  bool take(void *Dst, size_t N) {
    if (Data.size() - Pos < N)
      return false;
    std::memcpy(Dst, Data.data() + Pos, N);
    Pos += N;
    return true;
  }
  bool u32(uint32_t &V) { return take(&V, 4); }
  bool u64(uint64_t &V) { return take(&V, 8); }
  bool bytes(std::string &S, size_t N) {
    if (Data.size() - Pos < N)
      return false;
    S.assign(Data.data() + Pos, N);
    Pos += N;
    return true;
  }
  bool align8() {
    size_t Next = (Pos + 7) / 8 * 8;
    if (Next > Data.size())
      return false;
    Pos = Next;
    return true;
  }
};

uint64_t checksum(std::string_view Data) {
  return content_hash::hash(Data.data(), Data.size()).Lo;
}

std::string errnoText(const std::string &What, const std::string &Path) {
  return Path + ": " + What + ": " + std::strerror(errno);
}

} // namespace

std::string chunkPath(const Digest &Hash) {
  std::string Hex = content_hash::toHex(Hash);
  return "chunks/" + Hex.substr(0, 2) + "/" + Hex;
}

bool makeDirectories(const std::string &Path, std::string &Error) {
  std::string Partial;
  size_t Pos = 0;
  while (Pos != std::string::npos) {
    Pos = Path.find('/', Pos + 1);
    Partial = Path.substr(0, Pos);
    if (Partial.empty())
      continue;
    if (mkdir(Partial.c_str(), 0777) != 0 && errno != EEXIST) {
      Error = errnoText("cannot create directory", Partial);
      return false;
    }
  }
  return true;
}

std::string databaseMarker() {
  return "{\"format\":\"mneme-record-db\",\"version\":" + std::to_string(FormatVersion) +
         "}";
}

bool initDatabase(const std::string &Dir, std::string &Error) {
  if (!makeDirectories(Dir + "/index", Error) || !makeDirectories(Dir + "/chunks", Error))
    return false;
  const std::string Marker = Dir + "/database.json";
  if (!writeFileAtomic(Marker, databaseMarker(), Error, /*Exclusive=*/true) && !Error.empty())
    return false;
  std::string Found;
  if (!readFile(Marker, Found, Error))
    return false;
  if (Found != databaseMarker()) {
    Error = Marker + ": a record database of another format (" + Found + "); this mneme-cc "
            "writes " + databaseMarker() + ": choose another directory";
    return false;
  }
  return true;
}

namespace {

// Writes Pieces, in order, to a new temporary beside Path and moves it into
// place (see writeFileAtomic).  With MakeDirectories, the directory is made
// when it is missing.
// ReplaceMode (a file replaced in place): the new file takes that mode and
// reaches the disk before the rename, so a crash leaves the old file or a
// complete new one.
bool writePiecesAtomic(const std::string &Path, const std::string_view *Pieces, size_t Count,
                       std::string &Error, bool Exclusive, bool MakeDirectories,
                       int ReplaceMode = -1) {
  Error.clear();
  // A temporary of its own: named per process and call, and created
  // exclusively, since processes on two hosts sharing a file system may
  // have the same pid (or a crash may have left one).
  static std::atomic<uint64_t> Serial{0};
  std::string Tmp;
  int Fd = -1;
  for (int Try = 0; Try < 64 && Fd < 0; ++Try) {
    Tmp = Path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(Serial++);
    Fd = open(Tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (Fd < 0 && errno == ENOENT && MakeDirectories && Try == 0 &&
        makeDirectories(Path.substr(0, Path.rfind('/')), Error))
      Fd = open(Tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (Fd < 0 && errno != EEXIST)
      break;
  }
  if (Fd < 0) {
    if (Error.empty())
      Error = errnoText("cannot write", Tmp);
    return false;
  }
  std::vector<iovec> Left;
  for (size_t I = 0; I < Count; ++I)
    if (!Pieces[I].empty())
      Left.push_back(iovec{const_cast<char *>(Pieces[I].data()), Pieces[I].size()});
  size_t First = 0;
  while (First < Left.size()) {
    ssize_t N = writev(Fd, Left.data() + First, static_cast<int>(Left.size() - First));
    if (N < 0 && errno == EINTR)
      continue;
    if (N <= 0) {
      Error = errnoText("cannot write", Tmp);
      close(Fd);
      unlink(Tmp.c_str());
      return false;
    }
    // Past the pieces written whole, into the one written in part.
    for (size_t Done = N; Done;) {
      size_t Take = std::min(Done, Left[First].iov_len);
      Left[First].iov_base = static_cast<char *>(Left[First].iov_base) + Take;
      Left[First].iov_len -= Take;
      Done -= Take;
      if (Left[First].iov_len == 0)
        ++First;
    }
  }
  if (ReplaceMode >= 0 && (fchmod(Fd, static_cast<mode_t>(ReplaceMode)) != 0 || fsync(Fd) != 0)) {
    Error = errnoText("cannot write", Tmp);
    close(Fd);
    unlink(Tmp.c_str());
    return false;
  }
  close(Fd);
  if (Exclusive) {
    // link() fails if Path exists: the first writer wins, atomically.
    int Rc = link(Tmp.c_str(), Path.c_str());
    int Saved = errno;
    unlink(Tmp.c_str());
    if (Rc == 0)
      return true;
    errno = Saved;
    if (Saved != EEXIST)
      Error = errnoText("cannot create", Path);
    return false;
  }
  if (rename(Tmp.c_str(), Path.c_str()) != 0) {
    Error = errnoText("cannot rename into place", Path);
    unlink(Tmp.c_str());
    return false;
  }
  return true;
}

// A compression context and output buffer per writing thread: made once,
// since a chunk is small enough that making them each time would cost as
// much as compressing it.
struct Compressor {
  ZSTD_CCtx *Context = ZSTD_createCCtx();
  std::unique_ptr<char[]> Buffer;
  size_t Capacity = 0;
  ~Compressor() { ZSTD_freeCCtx(Context); }
  // The compressed bytes, or an empty view when compressing does not pay.
  std::string_view compress(const void *Data, size_t Size, int Level) {
    size_t Bound = ZSTD_compressBound(Size);
    if (Bound > Capacity) {
      Buffer.reset(new char[Bound]);
      Capacity = Bound;
    }
    if (!Context)
      return {};
    size_t N = ZSTD_compressCCtx(Context, Buffer.get(), Capacity, Data, Size, Level);
    if (ZSTD_isError(N) || N >= Size)
      return {};
    return std::string_view(Buffer.get(), N);
  }
};

} // namespace

bool writeFileAtomic(const std::string &Path, std::string_view Data,
                     std::string &Error, bool Exclusive) {
  return writePiecesAtomic(Path, &Data, 1, Error, Exclusive, /*MakeDirectories=*/false);
}

bool readFile(const std::string &Path, std::string &Out, std::string &Error) {
  int Fd = open(Path.c_str(), O_RDONLY | O_CLOEXEC);
  if (Fd < 0) {
    Error = errnoText("cannot read", Path);
    return false;
  }
  struct stat St;
  if (fstat(Fd, &St) != 0) {
    Error = errnoText("cannot stat", Path);
    close(Fd);
    return false;
  }
  Out.resize(St.st_size);
  size_t Done = 0;
  while (Done < Out.size()) {
    ssize_t N = read(Fd, Out.data() + Done, Out.size() - Done);
    if (N < 0 && errno == EINTR)
      continue;
    if (N <= 0)
      break;
    Done += N;
  }
  close(Fd);
  Out.resize(Done);
  return true;
}

namespace {
// Writes the chunk file for Data (Size bytes named Hash), compressed at
// Level where that pays; Exclusive keeps a file already there.  With
// ReplaceMode (compacting a raw chunk) nothing is written unless
// compression pays, and the new file takes that mode.
bool storeChunkFile(const std::string &Path, const Digest &Hash, const void *Data, size_t Size,
                    int Level, bool Exclusive, uint64_t &StoredBytes, std::string &Error,
                    int ReplaceMode = -1) {
  thread_local Compressor Zstd;
  std::string_view Payload = Level != 0 ? Zstd.compress(Data, Size, Level) : std::string_view();
  Codec C = Payload.empty() ? Codec::Raw : Codec::Zstd;
  if (C == Codec::Raw && ReplaceMode >= 0)
    return true; // raw already, and staying so
  // A raw payload is the chunk's content, so its checksum is the content
  // hash's low half, which the name carries: readChunk checks both.
  uint64_t Sum = Hash.Lo;
  if (C == Codec::Raw)
    Payload = std::string_view(static_cast<const char *>(Data), Size);
  else
    Sum = checksum(Payload);

  std::string Header;
  Header.reserve(ChunkHeaderSize);
  Header.append(ChunkMagic, 8);
  put32(Header, FormatVersion);
  put32(Header, static_cast<uint32_t>(C));
  put64(Header, Size);
  put64(Header, Payload.size());
  put64(Header, Hash.Lo);
  put64(Header, Hash.Hi);
  put64(Header, Sum);

  const std::string_view Pieces[] = {Header, Payload};
  if (!writePiecesAtomic(Path, Pieces, 2, Error, Exclusive, /*MakeDirectories=*/true,
                         ReplaceMode)) {
    if (!Error.empty())
      return false;
    return true; // another writer stored it first
  }
  StoredBytes = Header.size() + Payload.size();
  return true;
}

// The largest chunk a database holds (--chunk-size's bound).
constexpr uint64_t LargestChunk = 1ULL << 30;

struct ChunkHeader {
  uint32_t Codec = 0;
  uint64_t RawSize = 0, StoredSize = 0, Lo = 0, Hi = 0, Sum = 0;
};

// The header at the start of File (a chunk file, or its first bytes),
// checked: magic, format version, a raw size no chunk exceeds.
bool parseChunkHeader(std::string_view File, const std::string &Path, ChunkHeader &H,
                      std::string &Error) {
  Reader R{File};
  char Magic[8];
  uint32_t Version;
  if (!R.take(Magic, 8) || !R.u32(Version) || !R.u32(H.Codec) || !R.u64(H.RawSize) ||
      !R.u64(H.StoredSize) || !R.u64(H.Lo) || !R.u64(H.Hi) || !R.u64(H.Sum)) {
    Error = Path + ": truncated chunk header";
    return false;
  }
  if (std::memcmp(Magic, ChunkMagic, 8) != 0) {
    Error = Path + ": not a mneme chunk (bad magic)";
    return false;
  }
  if (Version != FormatVersion) {
    Error = Path + ": chunk format version " + std::to_string(Version) +
            " (this mneme-cc reads version " + std::to_string(FormatVersion) + ")";
    return false;
  }
  if (H.RawSize > LargestChunk) {
    Error = Path + ": chunk is corrupt (its header claims " + std::to_string(H.RawSize) +
            " bytes, more than any chunk)";
    return false;
  }
  return true;
}
} // namespace

bool writeChunk(const std::string &DbDir, const Digest &Hash, const void *Data,
                size_t Size, int Level, uint64_t &StoredBytes, std::string &Error) {
  StoredBytes = 0;
  std::string Path = DbDir + "/" + chunkPath(Hash);
  struct stat St;
  if (stat(Path.c_str(), &St) == 0)
    return true; // stored before: content addressing makes it the same bytes
  return storeChunkFile(Path, Hash, Data, Size, Level, /*Exclusive=*/true, StoredBytes, Error);
}

bool compactChunk(const std::string &DbDir, const Digest &Hash, int Level, uint64_t &Before,
                  uint64_t &After, std::string &Error) {
  Before = After = 0;
  std::string Path = DbDir + "/" + chunkPath(Hash);
  // Neither a link followed nor a FIFO waited on: only a regular file is a chunk.
  int Fd = open(Path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (Fd < 0) {
    Error = errnoText("cannot read", Path);
    return false;
  }
  struct stat St;
  char Header[ChunkHeaderSize];
  bool Regular = fstat(Fd, &St) == 0 && S_ISREG(St.st_mode);
  ssize_t Got = Regular ? pread(Fd, Header, sizeof Header, 0) : -1;
  close(Fd);
  if (!Regular) {
    Error = Path + ": not a regular file, so not a chunk";
    return false;
  }
  Before = After = static_cast<uint64_t>(St.st_size);
  ChunkHeader H;
  if (!parseChunkHeader(std::string_view(Header, Got > 0 ? Got : 0), Path, H, Error))
    return false;
  if (H.Codec == static_cast<uint32_t>(Codec::Zstd))
    return true; // compressed already (checked whenever it is read)
  // Checked before reading it whole: a file's size is not to be trusted.
  if (H.RawSize != H.StoredSize || Before != ChunkHeaderSize + H.StoredSize) {
    Error = Path + ": chunk is corrupt (its size disagrees with its header)";
    return false;
  }
  std::string Data;
  if (!readChunk(DbDir, Hash, Data, Error))
    return false;
  uint64_t Stored = 0;
  // Through a rename: a reader opens the raw file or the compressed one.
  if (!storeChunkFile(Path, Hash, Data.data(), Data.size(), Level, /*Exclusive=*/false, Stored,
                      Error, static_cast<int>(St.st_mode & 07777))) {
    Error = Path + ": cannot be rewritten (" + Error + ")";
    return false;
  }
  After = Stored ? Stored : Before;
  return true;
}

bool readChunk(const std::string &DbDir, const Digest &Hash, std::string &Out,
               std::string &Error) {
  std::string Path = DbDir + "/" + chunkPath(Hash);
  // Sizes are checked before memory is taken for them: a database may be
  // damaged or hostile.
  struct stat St;
  if (stat(Path.c_str(), &St) == 0 &&
      (!S_ISREG(St.st_mode) || static_cast<uint64_t>(St.st_size) >
                                   ChunkHeaderSize + ZSTD_compressBound(LargestChunk))) {
    Error = Path + ": chunk is corrupt (" +
            (S_ISREG(St.st_mode) ? "larger than any chunk" : "not a regular file") + ")";
    return false;
  }
  std::string File;
  if (!readFile(Path, File, Error))
    return false;
  ChunkHeader H;
  if (!parseChunkHeader(File, Path, H, Error))
    return false;
  std::string_view Payload(File.data() + ChunkHeaderSize, File.size() - ChunkHeaderSize);
  if (Payload.size() != H.StoredSize) {
    Error = Path + ": truncated chunk (" + std::to_string(Payload.size()) + " of " +
            std::to_string(H.StoredSize) + " payload bytes)";
    return false;
  }
  if (H.Lo != Hash.Lo || H.Hi != Hash.Hi || checksum(Payload) != H.Sum) {
    Error = Path + ": chunk is corrupt (checksum mismatch)";
    return false;
  }
  if (H.Codec == static_cast<uint32_t>(Codec::Raw)) {
    Out.assign(Payload);
  } else if (H.Codec == static_cast<uint32_t>(Codec::Zstd)) {
    Out.resize(H.RawSize);
    size_t N = ZSTD_decompress(Out.data(), H.RawSize, Payload.data(), Payload.size());
    if (ZSTD_isError(N) || N != H.RawSize) {
      Error = Path + ": chunk does not decompress";
      return false;
    }
  } else {
    Error = Path + ": unknown chunk codec " + std::to_string(H.Codec);
    return false;
  }
  if (content_hash::hash(Out.data(), Out.size()) != Hash) {
    Error = Path + ": chunk content does not match its name";
    return false;
  }
  return true;
}

std::string encodeState(const State &S) {
  std::string Body;
  put64(Body, S.ChunkSize);
  put32(Body, static_cast<uint32_t>(S.Metadata.size()));
  put32(Body, static_cast<uint32_t>(S.Regions.size()));
  Body += S.Metadata;
  pad8(Body);
  for (const Region &Rg : S.Regions) {
    put32(Body, static_cast<uint32_t>(Rg.Kind));
    put32(Body, static_cast<uint32_t>(Rg.Name.size()));
    put64(Body, Rg.Address);
    put64(Body, Rg.Size);
    put64(Body, Rg.Chunks.size());
    Body += Rg.Name;
    pad8(Body);
    for (const ChunkRef &C : Rg.Chunks) {
      put64(Body, C.Index);
      put64(Body, C.Hash.Lo);
      put64(Body, C.Hash.Hi);
    }
  }
  std::string Out;
  Out.append(StateMagic, 8);
  put32(Out, FormatVersion);
  put32(Out, static_cast<uint32_t>(S.Kind));
  put64(Out, Body.size());
  put64(Out, checksum(Body));
  return Out + Body;
}

bool decodeState(std::string_view Data, State &Out, std::string &Error) {
  Reader R{Data};
  char Magic[8];
  uint32_t Version, Kind;
  uint64_t BodySize, Sum;
  if (!R.take(Magic, 8) || !R.u32(Version) || !R.u32(Kind) || !R.u64(BodySize) ||
      !R.u64(Sum)) {
    Error = "truncated header";
    return false;
  }
  if (std::memcmp(Magic, StateMagic, 8) != 0) {
    Error = "not a mneme device-state file (bad magic)";
    return false;
  }
  if (Version != FormatVersion) {
    Error = "device-state format version " + std::to_string(Version) +
            " (this mneme-cc reads version " + std::to_string(FormatVersion) + ")";
    return false;
  }
  std::string_view Body = Data.substr(StateHeaderSize);
  if (Body.size() != BodySize) {
    Error = "truncated (" + std::to_string(Body.size()) + " of " +
            std::to_string(BodySize) + " body bytes)";
    return false;
  }
  if (checksum(Body) != Sum) {
    Error = "corrupt (checksum mismatch)";
    return false;
  }
  if (Kind < 1 || Kind > 3) {
    Error = "unknown state kind " + std::to_string(Kind);
    return false;
  }
  Reader B{Body};
  uint32_t MetaSize, RegionCount;
  Out = State();
  Out.Kind = static_cast<StateKind>(Kind);
  bool Ok = B.u64(Out.ChunkSize) && B.u32(MetaSize) && B.u32(RegionCount) &&
            B.bytes(Out.Metadata, MetaSize) && B.align8();
  for (uint32_t I = 0; Ok && I < RegionCount; ++I) {
    Region Rg;
    uint32_t RKind, NameSize;
    uint64_t Refs;
    Ok = B.u32(RKind) && B.u32(NameSize) && B.u64(Rg.Address) && B.u64(Rg.Size) &&
         B.u64(Refs) && B.bytes(Rg.Name, NameSize) && B.align8() &&
         Refs <= (Body.size() - B.Pos) / 24;
    Rg.Kind = static_cast<RegionKind>(RKind);
    for (uint64_t J = 0; Ok && J < Refs; ++J) {
      ChunkRef C;
      Ok = B.u64(C.Index) && B.u64(C.Hash.Lo) && B.u64(C.Hash.Hi);
      Rg.Chunks.push_back(C);
    }
    Out.Regions.push_back(std::move(Rg));
  }
  if (!Ok || Out.ChunkSize == 0) {
    Error = "malformed body";
    return false;
  }
  return true;
}

bool readStateFile(const std::string &Path, State &Out, std::string &Error) {
  std::string Data;
  if (!readFile(Path, Data, Error))
    return false;
  if (!decodeState(Data, Out, Error)) {
    Error = Path + ": " + Error;
    return false;
  }
  return true;
}

} // namespace mneme::store
