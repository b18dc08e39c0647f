// The one writer of the record database on the recorder's side.  It
// creates the database, claims instances, names their files, composes
// their manifests and JSON descriptions, and hands everything to the
// DatabaseWriter, which commits it in the background.  It also knows which
// chunks are stored or queued, so each chunk is written once.
//
//   index/<static>.<dynamic>.claim                 held while this process records it
//   index/<static>.<dynamic>.json                  the index entry (committed last)
//   DeviceState.prologue.<static>.<dynamic>.mneme  device state before the launch
//   DeviceState.epilogue.<static>.<dynamic>.mneme  what the launch changed
//   <static>.json, Image.<static>.mneme, RecordedIR_<static>.bc   once per kernel
//
// docs/record-db.md specifies these files; the Python reader
// (mneme_cc/recorddb.py) depends on every name and key.
#ifndef MNEME_RECORDER_INSTANCE_WRITER_H
#define MNEME_RECORDER_INSTANCE_WRITER_H

#include "DatabaseWriter.h"
#include "KernelState.h"
#include "LaunchCapture.h"
#include "LaunchRequest.h"
#include "Registry.h"
#include "VAWindow.h"

#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace mneme::recorder {

// One captured launch and what its description tells about it.
struct Instance {
  KernelState &Kernel; // marked described once its kernel files are queued
  const LaunchRequest &Launch;
  const std::string &Args;    // the packed argument bytes
  const std::string &Dynamic; // the dynamic hash
  const CapturedLaunch &Capture;
  const std::vector<VariableSymbol> &Globals;
  std::string_view AppImage;
  const std::vector<std::string> &Reasons; // why it may not replay
  unsigned StreamFlags;
  const VAWindow &Window;
  const std::string &DeviceName, &Arch;
};

class InstanceWriter {
public:
  // Creates or opens the database at Directory; false, naming the file,
  // when it cannot be written or holds another version.
  bool open(const std::string &Directory, std::string &Error);
  // When recording starts: a fresh background writer.  The chunks known
  // to be stored or queued are kept across device resets.
  // Threads compress as others would; IdleThreads only on otherwise idle
  // processors (DatabaseWriter).
  void start(int ZstdLevel, unsigned Threads, unsigned IdleThreads = 0);
  bool started() const { return Writer != nullptr; }
  bool failed() const { return Writer && Writer->failed(); }
  // Waits for everything queued; MoreThreads join the compression first.
  void drain(unsigned MoreThreads = 0, bool Raw = false) {
    if (Writer)
      Writer->drain(MoreThreads, Raw);
  }
  uint64_t committed() const { return Writer->committed(); }
  WriterStats writerStats() const { return Writer->stats(); }

  // Claims an instance for this process; false if another one holds it.
  bool claim(const std::string &Static, const std::string &Dynamic) const;
  // Gives a claimed instance up; the chunks it noted are no longer known,
  // since they will not be written.
  void abandon(const std::string &Static, const std::string &Dynamic);

  // Notes a chunk as stored or queued; false if it already was.
  bool newChunk(const Digest &D) {
    if (!Known.insert(D).second)
      return false;
    Pending.push_back(D);
    return true;
  }
  // Whether another process or run has stored the chunk.  A database that
  // held no chunk when this process opened it is not asked: a stat per new
  // chunk contends with the writer's file creations (15 ms over 513
  // chunks), and a chunk a concurrent process stores meanwhile is only
  // copied twice, not stored twice (the store skips a chunk it holds).
  bool storedChunk(const Digest &D) const;

  // Adds the instance's argument bytes, the application's image, the
  // manifests and the descriptions to Job, which holds the captured
  // chunks; the claim goes once Job is committed.
  void compose(const Instance &I, InstanceJob &Job);
  // Queues Job; blocks while too much host memory is pending.
  void submit(std::unique_ptr<InstanceJob> Job) {
    Pending.clear();
    Writer->submit(std::move(Job));
  }

private:
  Digest queueArguments(const std::string &Args, InstanceJob &Job);
  store::State imageState(std::string_view AppImage, InstanceJob &Job);

  // InstanceJson.cpp.  The instance's description is left open: its
  // index entry appends the bytes stored.
  static std::string describeInstance(const Instance &I, const std::string &PrologueFile,
                                      const std::string &EpilogueFile);
  static std::string describeKernel(const KernelState &K,
                                    const std::vector<VariableSymbol> &Globals,
                                    std::string_view AppImage);

  static std::string claimFile(const std::string &Static, const std::string &Dynamic);
  static std::string entryFile(const std::string &Static, const std::string &Dynamic);
  static std::string manifestFile(const char *Which, const std::string &Static,
                                  const std::string &Dynamic);
  static std::string kernelFile(const std::string &Static);
  static std::string imageFile(const std::string &Static);
  static std::string irFile(const std::string &Static);

  struct DigestHasher {
    size_t operator()(const Digest &D) const { return D.Lo; }
  };
  std::string Directory;
  std::unique_ptr<DatabaseWriter> Writer;
  std::unordered_set<Digest, DigestHasher> Known;
  bool HeldChunks = false; // when opened
  // Chunks the instance being captured noted: known only once it is submitted.
  std::vector<Digest> Pending;
};

} // namespace mneme::recorder

#endif
