#include "InstanceWriter.h"

#include "Options.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace mneme::recorder {
namespace {

using store::RegionKind;

// The prologue lists every chunk and the arguments; the epilogue only the
// chunks the kernel changed.
void composeManifests(const CapturedLaunch &C, const std::string &Args, const Digest &ArgsHash,
                      store::State &Prologue, store::State &Epilogue) {
  Prologue.Kind = store::StateKind::Prologue;
  Epilogue.Kind = store::StateKind::Epilogue;
  Prologue.ChunkSize = Epilogue.ChunkSize = options().ChunkSize;
  for (size_t I = 0; I < C.Regions.size(); ++I) {
    store::Region P;
    P.Kind = C.Regions[I].Kind;
    P.Name = C.Regions[I].Name;
    P.Address = C.Regions[I].Address;
    P.Size = C.Regions[I].Size;
    store::Region E = P;
    for (uint64_t K = 0; K < C.Before[I].size(); ++K) {
      P.Chunks.push_back(store::ChunkRef{K, C.Before[I][K]});
      if (C.Changed[I][K])
        E.Chunks.push_back(store::ChunkRef{K, C.After[I][K]});
    }
    Prologue.Regions.push_back(std::move(P));
    Epilogue.Regions.push_back(std::move(E));
  }
  store::Region ArgRegion;
  ArgRegion.Kind = RegionKind::Arguments;
  ArgRegion.Name = "arguments";
  ArgRegion.Size = Args.size();
  if (!Args.empty())
    ArgRegion.Chunks.push_back(store::ChunkRef{0, ArgsHash});
  Prologue.Regions.push_back(ArgRegion);
}

} // namespace

std::string InstanceWriter::claimFile(const std::string &Static, const std::string &Dynamic) {
  return "index/" + Static + "." + Dynamic + ".claim";
}

std::string InstanceWriter::entryFile(const std::string &Static, const std::string &Dynamic) {
  return "index/" + Static + "." + Dynamic + ".json";
}

std::string InstanceWriter::manifestFile(const char *Which, const std::string &Static,
                                         const std::string &Dynamic) {
  return std::string("DeviceState.") + Which + "." + Static + "." + Dynamic + ".mneme";
}

std::string InstanceWriter::kernelFile(const std::string &Static) { return Static + ".json"; }

std::string InstanceWriter::imageFile(const std::string &Static) {
  return "Image." + Static + ".mneme";
}

std::string InstanceWriter::irFile(const std::string &Static) {
  return "RecordedIR_" + Static + ".bc";
}

bool InstanceWriter::open(const std::string &Dir, std::string &Error) {
  Directory = Dir;
  HeldChunks = false;
  if (DIR *Chunks = opendir((Directory + "/chunks").c_str())) {
    while (dirent *E = readdir(Chunks))
      if (std::strcmp(E->d_name, ".") != 0 && std::strcmp(E->d_name, "..") != 0) {
        HeldChunks = true;
        break;
      }
    closedir(Chunks);
  }
  return store::initDatabase(Directory, Error);
}

void InstanceWriter::start(int ZstdLevel, unsigned Threads, unsigned IdleThreads) {
  Writer = std::make_unique<DatabaseWriter>(Directory, ZstdLevel, Threads, IdleThreads);
}

bool InstanceWriter::claim(const std::string &Static, const std::string &Dynamic) const {
  std::string Claim = Directory + "/" + claimFile(Static, Dynamic);
  int Fd = ::open(Claim.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (Fd < 0)
    return false;
  std::string Pid = std::to_string(getpid()) + "\n";
  if (write(Fd, Pid.data(), Pid.size()) < 0) {
  }
  close(Fd);
  return true;
}

void InstanceWriter::abandon(const std::string &Static, const std::string &Dynamic) {
  for (const Digest &D : Pending)
    Known.erase(D);
  Pending.clear();
  unlink((Directory + "/" + claimFile(Static, Dynamic)).c_str());
}

bool InstanceWriter::storedChunk(const Digest &D) const {
  if (!HeldChunks)
    return false;
  struct stat St;
  return stat((Directory + "/" + store::chunkPath(D)).c_str(), &St) == 0;
}

void InstanceWriter::compose(const Instance &I, InstanceJob &Job) {
  KernelState &K = I.Kernel;
  const std::string &Static = K.StaticHash;
  Digest ArgsHash = queueArguments(I.Args, Job);
  // The image and the kernel's description, once per kernel and process.
  bool Describe = !K.DescriptionQueued;
  store::State Image;
  if (Describe && !I.AppImage.empty())
    Image = imageState(I.AppImage, Job);
  store::State Prologue, Epilogue;
  composeManifests(I.Capture, I.Args, ArgsHash, Prologue, Epilogue);

  // The instance's description, embedded in the manifests and indexed.
  const std::string PrologueFile = manifestFile("prologue", Static, I.Dynamic);
  const std::string EpilogueFile = manifestFile("epilogue", Static, I.Dynamic);
  std::string Description = describeInstance(I, PrologueFile, EpilogueFile);
  Prologue.Metadata = Description + "}";
  Epilogue.Metadata = Prologue.Metadata;
  std::string KernelJson, IRFile;
  if (Describe) {
    K.DescriptionQueued = true;
    KernelJson = describeKernel(K, I.Globals, I.AppImage);
    if (K.IR)
      IRFile = irFile(Static);
  }

  std::string PrologueData = store::encodeState(Prologue);
  std::string EpilogueData = store::encodeState(Epilogue);
  std::string ImageData = Image.Regions.empty() ? "" : store::encodeState(Image);
  std::string IRBitcode = K.IR && Describe ? K.IR->Bitcode : "";
  std::string Entry = entryFile(Static, I.Dynamic);
  Job.RemoveAfter.push_back(claimFile(Static, I.Dynamic));
  // Kernel files first and the index entry last (see DatabaseWriter.h).
  Job.Files = [=](uint64_t Stored) {
    std::vector<OutputFile> Files;
    if (!IRBitcode.empty())
      Files.push_back(OutputFile{IRFile, IRBitcode, true});
    if (!ImageData.empty())
      Files.push_back(OutputFile{imageFile(Static), ImageData, true});
    if (!KernelJson.empty())
      Files.push_back(OutputFile{kernelFile(Static), KernelJson, true});
    Files.push_back(OutputFile{PrologueFile, PrologueData, false});
    Files.push_back(OutputFile{EpilogueFile, EpilogueData, false});
    Files.push_back(OutputFile{Entry, Description + ",\"stored_bytes\":" +
                                          std::to_string(Stored) + "}",
                               false});
    return Files;
  };
}

// The argument bytes are a chunk of their own.
Digest InstanceWriter::queueArguments(const std::string &Args, InstanceJob &Job) {
  Digest ArgsHash = content_hash::hash(Args.data(), Args.size());
  if (newChunk(ArgsHash)) {
    HostBuffer Buffer = allocateHostBuffer(Args.size());
    std::memcpy(Buffer.get(), Args.data(), Args.size());
    Job.Chunks.push_back(ChunkTask{ArgsHash, Buffer, 0, Args.size()});
  }
  return ArgsHash;
}

// The application's image, as a manifest of its own.
store::State InstanceWriter::imageState(std::string_view AppImage, InstanceJob &Job) {
  const uint64_t ChunkSize = options().ChunkSize;
  store::State Image;
  Image.Kind = store::StateKind::Image;
  Image.ChunkSize = ChunkSize;
  store::Region Rg;
  Rg.Kind = RegionKind::Image;
  Rg.Name = "fatbin";
  Rg.Size = AppImage.size();
  HostBuffer Buffer = allocateHostBuffer(AppImage.size());
  std::memcpy(Buffer.get(), AppImage.data(), AppImage.size());
  for (uint64_t C = 0; C * ChunkSize < AppImage.size(); ++C) {
    uint64_t Size = std::min<uint64_t>(ChunkSize, AppImage.size() - C * ChunkSize);
    Digest D = content_hash::hash(AppImage.data() + C * ChunkSize, Size);
    Rg.Chunks.push_back(store::ChunkRef{C, D});
    if (newChunk(D))
      Job.Chunks.push_back(ChunkTask{D, Buffer, C * ChunkSize, Size});
  }
  Image.Regions.push_back(std::move(Rg));
  return Image;
}

} // namespace mneme::recorder
