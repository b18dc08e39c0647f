// The JSON descriptions of an instance and of its kernel
// (docs/record-db.md); the keys and their order are part of the format.
#include "InstanceWriter.h"
#include "Json.h"
#include "Options.h"

#include <unistd.h>

#include <ctime>

namespace mneme::recorder {
namespace {

std::string toHexBytes(const std::string &Bytes) {
  static const char Digits[] = "0123456789abcdef";
  std::string Out;
  for (unsigned char C : Bytes) {
    Out += Digits[C >> 4];
    Out += Digits[C & 15];
  }
  return Out;
}

std::string isoNow() {
  std::time_t T = std::time(nullptr);
  char Buf[32];
  std::strftime(Buf, sizeof Buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&T));
  return Buf;
}

void writeDim(JsonWriter &J, const char *Key, dim3 D) {
  J.key(Key).beginArray().value(D.x).value(D.y).value(D.z).endArray();
}

void writeLaunch(JsonWriter &J, const LaunchRequest &R, unsigned StreamFlags) {
  J.key("launch").beginObject().field("api", R.Api);
  writeDim(J, "grid", R.Grid);
  writeDim(J, "block", R.Block);
  if (R.Cluster.x)
    writeDim(J, "cluster", R.Cluster);
  else
    J.key("cluster").null();
  J.field("shared_mem_bytes", static_cast<uint64_t>(R.SharedMem))
      .field("cooperative", R.Cooperative)
      .field("stream_flags", StreamFlags)
      .field("default_stream", R.Stream == nullptr)
      .endObject();
}

void writeParams(JsonWriter &J, const std::vector<KernelParam> &Params) {
  J.key("params").beginArray();
  for (const KernelParam &P : Params)
    J.beginObject().field("offset", P.Offset).field("size", P.Size).endObject();
  J.endArray();
}

// Where it was recorded: the VA window, the device, the process.
void writeWhere(JsonWriter &J, const Instance &I) {
  char Host[256] = {0};
  gethostname(Host, sizeof Host - 1);
  J.key("window")
      .beginObject()
      .field("base", I.Window.base())
      .field("size", I.Window.size())
      .field("granularity", I.Window.granularity())
      .endObject();
  J.key("device")
      .beginObject()
      .field("ordinal", I.Window.device())
      .field("name", I.DeviceName)
      .field("arch", I.Arch)
      .endObject();
  J.key("process")
      .beginObject()
      .field("pid", static_cast<int64_t>(getpid()))
      .field("rank", options().Rank)
      .field("host", Host)
      .endObject();
}

} // namespace

std::string InstanceWriter::describeInstance(const Instance &I, const std::string &PrologueFile,
                                             const std::string &EpilogueFile) {
  const KernelState &K = I.Kernel;
  uint64_t RawBytes = I.Args.size();
  for (const SnapshotRegion &Rg : I.Capture.Regions)
    RawBytes += Rg.Size;
  JsonWriter J;
  J.beginObject()
      .field("format", "mneme-instance")
      .field("version", static_cast<uint64_t>(store::FormatVersion))
      .field("kernel", K.Name)
      .field("demangled", K.Demangled)
      .field("static_hash", K.StaticHash)
      .field("dynamic_hash", I.Dynamic)
      .field("has_ir", K.IR != nullptr);
  writeLaunch(J, I.Launch, I.StreamFlags);
  writeParams(J, K.Params);
  J.field("args_hex", toHexBytes(I.Args))
      .field("launch_index", K.Launches)
      .field("in_app_ms", static_cast<double>(I.Capture.Ms))
      .field("replayable", I.Reasons.empty());
  J.key("reasons").beginArray();
  for (const std::string &Why : I.Reasons)
    J.value(Why);
  J.endArray();
  writeWhere(J, I);
  J.field("recorded_at", isoNow())
      .field("prologue", PrologueFile)
      .field("epilogue", EpilogueFile)
      .field("raw_bytes", RawBytes)
      .field("changed_bytes", I.Capture.ChangedBytes);
  return J.str();
}

std::string InstanceWriter::describeKernel(const KernelState &K,
                                           const std::vector<VariableSymbol> &Globals,
                                           std::string_view AppImage) {
  JsonWriter KJ;
  KJ.beginObject()
      .field("format", "mneme-kernel")
      .field("version", static_cast<uint64_t>(store::FormatVersion))
      .field("static_hash", K.StaticHash)
      .field("name", K.Name)
      .field("demangled", K.Demangled)
      .field("has_ir", K.IR != nullptr);
  if (K.IR) {
    KJ.key("ir")
        .beginObject()
        .field("file", irFile(K.StaticHash))
        .field("bytes", static_cast<uint64_t>(K.IR->Bitcode.size()))
        .field("content_hash",
               content_hash::toHex(
                   content_hash::hash(K.IR->Bitcode.data(), K.IR->Bitcode.size())))
        .key("metadata")
        .raw(K.IR->Metadata)
        .endObject();
  } else {
    KJ.key("ir").null();
  }
  if (!AppImage.empty())
    KJ.key("image")
        .beginObject()
        .field("file", imageFile(K.StaticHash))
        .field("bytes", static_cast<uint64_t>(AppImage.size()))
        .endObject();
  else
    KJ.key("image").null();
  writeParams(KJ, K.Params);
  KJ.key("globals").beginArray();
  for (const VariableSymbol &V : Globals)
    KJ.beginObject()
        .field("name", V.Name)
        .field("size", V.Size)
        .field("constant", V.Constant)
        .endObject();
  KJ.endArray().endObject();
  return KJ.str();
}

} // namespace mneme::recorder
