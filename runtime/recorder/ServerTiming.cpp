// The serving runtime's kernel times (CUDA events around launches, read
// without waiting where possible) and its report at exit.
#include "Server.h"

#include "CudaApi.h"
#include "Json.h"
#include "Options.h"

#include <unistd.h>

#include <cstdio>

namespace mneme::recorder {

bool Server::timingStart(Context &C, CUcontext Ctx, CUstream S, Kernel &K, bool Served,
                         Timing &T) {
  CUstreamCaptureStatus Capture = CU_STREAM_CAPTURE_STATUS_NONE;
  // A stream being captured into a graph records no time.
  if (driver().StreamIsCapturing(S, &Capture) != CUDA_SUCCESS ||
      Capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return false;
  CUevent Events[2] = {nullptr, nullptr};
  for (CUevent &E : Events) {
    if (!C.Events.empty()) {
      E = C.Events.back();
      C.Events.pop_back();
    } else if (driver().EventCreate(&E, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
      E = nullptr;
    }
  }
  if (!Events[0] || !Events[1] || driver().EventRecord(Events[0], S) != CUDA_SUCCESS) {
    for (CUevent E : Events)
      if (E)
        C.Events.push_back(E);
    return false;
  }
  T = Timing{Ctx, Events[0], Events[1], &K, Served};
  return true;
}

void Server::recycle(const Timing &T) {
  // Looked up again: a reset may have destroyed the context and its events.
  if (auto It = Contexts.find(T.Ctx); It != Contexts.end())
    It->second.Events.insert(It->second.Events.end(), {T.Start, T.Stop});
}

void Server::collect(bool Wait) {
  // Launches finish roughly in order: without waiting, stop at the first
  // one still running, so a deep queue costs one query per launch.
  while (!Pending.empty()) {
    Timing &T = Pending.front();
    CUresult Ready = Wait ? driver().EventSynchronize(T.Stop) : driver().EventQuery(T.Stop);
    if (Ready == CUDA_ERROR_NOT_READY)
      return;
    float Ms = 0;
    if (Ready == CUDA_SUCCESS && driver().EventElapsedTime(&Ms, T.Start, T.Stop) == CUDA_SUCCESS) {
      (T.Served ? T.K->ServedMs : T.K->PassedMs) += Ms;
      ++(T.Served ? T.K->ServedTimed : T.K->PassedTimed);
    }
    recycle(T);
    Pending.pop_front();
  }
}

void Server::writeReport() {
  JsonWriter W;
  W.beginObject().field("format", "mneme-serve-report").field("version", 1)
      .field("pid", static_cast<int64_t>(getpid())).key("kernels").beginArray();
  std::vector<const Kernel *> All;
  for (const auto &[Function, K] : Kernels)
    All.push_back(&K);
  for (const auto &Node : Unloaded)
    All.push_back(&Node.mapped());
  for (const Kernel *Each : All) {
    const Kernel &K = *Each;
    W.beginObject().field("kernel", K.Name).field("demangled", K.Demangled)
        .field("tuned", K.Table != nullptr).field("launches", K.Launches)
        .field("served", K.Served).key("passed_through").beginObject();
    if (K.NotTuned)
      W.field("not tuned", K.NotTuned);
    for (const auto &[Why, N] : K.Passed)
      W.field(Why, N);
    W.endObject().field("served_ms", K.ServedMs).field("passed_through_ms", K.PassedMs)
        .field("timed_served", K.ServedTimed).field("timed_passed_through", K.PassedTimed)
        .endObject();
  }
  W.endArray().endObject();
  std::string Path = Table.Report + "/serve-report." + std::to_string(getpid()) + ".json";
  std::string Temporary = Path + ".tmp";
  FILE *F = std::fopen(Temporary.c_str(), "w");
  bool Ok = F && std::fwrite(W.str().data(), 1, W.str().size(), F) == W.str().size();
  Ok = F && std::fclose(F) == 0 && Ok;
  if (!Ok || std::rename(Temporary.c_str(), Path.c_str()) != 0)
    report("cannot write the serving report " + Path);
}

} // namespace mneme::recorder
