#include "ChunkCopier.h"

#include "Clock.h"
#include "CudaApi.h"
#include "FetchPieces.h"
#include "InstanceWriter.h"
#include "Options.h"

#include <algorithm>

namespace mneme::recorder {

namespace {
// Bytes one fetch copies at most (FetchPieces.h): an instance's staged
// gigabytes spread over the writer's fetch threads.
constexpr uint64_t FetchPieceBytes = 32ULL << 20;
// Each half of a fetcher's pinned buffer: pinning costs about 0.7 ms per
// MiB and a copy out of it runs at memcpy's pace, which 1 MiB halves keep.
constexpr uint64_t FetcherPinnedBytes = 1ULL << 20;
// Unused staging memory kept for the next instance once nothing is staged.
constexpr uint64_t StagingReserveBytes = 256ULL << 20;
} // namespace

void ChunkCopier::reset() {
  std::lock_guard<std::mutex> G(FetchersLock);
  IdleFetchers.clear();
  Staging.reset();
}

bool ChunkCopier::copy(const std::vector<SnapshotRegion> &Regions,
                       const std::vector<std::vector<Digest>> &Digests,
                       const std::vector<std::vector<bool>> *Changed, InstanceJob &Job,
                       std::vector<StagedCopy> &Staged, std::string &Error) {
  for (size_t R = 0; R < Regions.size(); ++R) {
    const std::vector<Digest> &D = Digests[R];
    std::vector<bool> Need = missing(D, Changed ? &(*Changed)[R] : nullptr);
    for (size_t I = 0; I < D.size();) {
      if (!Need[I]) {
        ++I;
        continue;
      }
      size_t End = I;
      while (End < D.size() && Need[End])
        ++End;
      if (!copyRun(Regions[R], D, I, End, Job, Staged, Error))
        return false;
      I = End;
    }
  }
  return true;
}

// Which chunks the store lacks (each is counted as queued from here on).
std::vector<bool> ChunkCopier::missing(const std::vector<Digest> &Digests,
                                       const std::vector<bool> *Changed) {
  std::vector<bool> Need(Digests.size(), false);
  for (size_t I = 0; I < Digests.size(); ++I) {
    if (Changed && !(*Changed)[I])
      continue;
    if (!Database.newChunk(Digests[I]))
      continue;
    if (Database.storedChunk(Digests[I]))
      continue; // another process or run stored it
    Need[I] = true;
  }
  return Need;
}

bool ChunkCopier::copyRun(const SnapshotRegion &Region, const std::vector<Digest> &Digests,
                          size_t First, size_t End, InstanceJob &Job,
                          std::vector<StagedCopy> &Staged, std::string &Error) {
  const uint64_t ChunkSize = options().ChunkSize;
  uint64_t From = First * ChunkSize;
  uint64_t Bytes = std::min<uint64_t>(End * ChunkSize, Region.Size) - From;
  HostBuffer Buffer = allocateHostBuffer(Bytes);
  CUdeviceptr Copy = 0;
  if (Staging.take(Bytes, StagingCap, Copy)) {
    if (!Snapshot.copyOnDevice(Region.Address + From, Bytes, Copy)) {
      Staging.give(Copy);
      Error = "staging a copy on the device failed";
      return false;
    }
    Staged.push_back(StagedCopy{Copy, Bytes, Buffer});
  } else if (!Snapshot.copyToHost(Region.Address + From, Bytes, Buffer.get(), Error)) {
    return false;
  }
  for (size_t C = First; C < End; ++C) {
    uint64_t Offset = (C - First) * ChunkSize;
    Job.Chunks.push_back(
        ChunkTask{Digests[C], Buffer, Offset, std::min<uint64_t>(ChunkSize, Bytes - Offset)});
  }
  Job.HostBytes += Bytes;
  CopiedBytes += Bytes;
  ++CopyRuns;
  return true;
}

void ChunkCopier::unstage(const std::vector<StagedCopy> &Staged) {
  // The copies may still be under way.
  std::string Ignored;
  Snapshot.wait(Ignored);
  for (const StagedCopy &S : Staged)
    Staging.give(S.Copy);
}

void ChunkCopier::fetches(const std::vector<StagedCopy> &Staged,
                          std::vector<std::function<bool(std::string &Error)>> &Out) {
  // Frees the staged copy when the last of its pieces is done (or dropped).
  struct Release {
    ChunkCopier *Copier;
    CUdeviceptr Copy;
    Release(ChunkCopier *Owner, CUdeviceptr P) : Copier(Owner), Copy(P) {}
    Release(const Release &) = delete; // freed once, by the last piece
    ~Release() { Copier->releaseStaged(Copy); }
  };
  struct Part {
    std::shared_ptr<Release> Owner;
    HostBuffer Buffer;
    uint64_t At, Bytes;
  };
  std::vector<std::shared_ptr<Release>> Owners;
  std::vector<uint64_t> Sizes;
  for (const StagedCopy &S : Staged) {
    Owners.push_back(std::make_shared<Release>(this, S.Copy));
    Sizes.push_back(S.Bytes);
  }
  for (const std::vector<FetchSpan> &Piece : fetchPieces(Sizes, FetchPieceBytes)) {
    std::vector<Part> Parts;
    for (const FetchSpan &F : Piece)
      Parts.push_back(Part{Owners[F.Copy], Staged[F.Copy].Buffer, F.At, F.Bytes});
    Out.push_back([this, Parts = std::move(Parts)](std::string &Error) {
      for (const Part &P : Parts)
        if (!fetchPiece(P.Owner->Copy + P.At, P.Bytes, P.Buffer.get() + P.At, Error))
          return false;
      return true;
    });
  }
}

bool ChunkCopier::fetchPiece(CUdeviceptr From, uint64_t Bytes, char *To, std::string &Error) {
  driver().CtxSetCurrent(Context);
  std::unique_ptr<DeviceSnapshot> Fetcher;
  {
    std::lock_guard<std::mutex> G(FetchersLock);
    if (!IdleFetchers.empty()) {
      Fetcher = std::move(IdleFetchers.back());
      IdleFetchers.pop_back();
    }
  }
  if (!Fetcher) {
    double T0 = now();
    Fetcher = std::make_unique<DeviceSnapshot>();
    if (!Fetcher->init(Error, FetcherPinnedBytes, /*Kernels=*/false) ||
        !Fetcher->pinStaging(Error))
      return false;
    FetcherSetupNs += static_cast<uint64_t>((now() - T0) * 1e9);
    ++FetchersMade;
  }
  if (!Fetcher->copyToHost(From, Bytes, To, Error)) {
    // A copy may still be under way on its stream: the fetcher is let go
    // once it is done, not used again.
    std::string Ignored;
    Fetcher->wait(Ignored);
    return false;
  }
  std::lock_guard<std::mutex> G(FetchersLock);
  IdleFetchers.push_back(std::move(Fetcher));
  return true;
}

void ChunkCopier::releaseStaged(CUdeviceptr Copy) {
  // Once every staged copy is on the host, the device gets back what is
  // kept beyond a reserve (on a fetch thread, which nothing waits for).
  if (Staging.give(Copy)) {
    driver().CtxSetCurrent(Context);
    Staging.trim(StagingReserveBytes);
  }
}

} // namespace mneme::recorder
