// Device-to-host hand-off files.
#include "MnemePasses.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace llvm;

static cl::opt<std::string>
    HandoffDir("mneme-handoff-dir",
               cl::desc("Directory where mneme's device jobs leave IR for the "
                        "host job (default: $MNEME_HANDOFF_DIR, else "
                        "$TMPDIR/mneme-handoff-<uid>)"));

static cl::opt<std::string>
    HandoffKey("mneme-handoff-key",
               cl::desc("Override the key that pairs a TU's device and host "
                        "jobs (for testing with opt)"));

namespace {

std::string readFile(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  std::stringstream S;
  S << In.rdbuf();
  return S.str();
}

// Field 22 of /proc/PID/stat: start time in clock ticks since boot.  With the
// pid it names a process uniquely, even after the pid is reused.
std::string processStartTime(pid_t Pid) {
  std::string Stat = readFile("/proc/" + std::to_string(Pid) + "/stat");
  size_t Close = Stat.rfind(')'); // the command name may hold spaces
  if (Close == std::string::npos)
    return "0";
  std::istringstream Fields(Stat.substr(Close + 2));
  std::string Field;
  for (int I = 3; I <= 22 && (Fields >> Field); ++I) {
  }
  return Field;
}

// The clang driver that runs this job: ourselves when cc1 runs in-process
// (clang's default), our parent when it was spawned as `clang -cc1`.
pid_t driverProcess() {
  std::string CmdLine = readFile("/proc/self/cmdline");
  size_t FirstEnd = CmdLine.find('\0');
  bool SeparateCC1 = FirstEnd != std::string::npos &&
                     CmdLine.compare(FirstEnd + 1, 5, "-cc1\0", 5) == 0;
  return SeparateCC1 ? getppid() : getpid();
}

} // namespace

namespace mneme {

std::string handoffDirectory(std::string &Error) {
  std::string Dir = HandoffDir;
  if (Dir.empty())
    if (const char *Env = std::getenv("MNEME_HANDOFF_DIR"))
      Dir = Env;
  if (Dir.empty()) {
    SmallString<128> Tmp;
    sys::path::system_temp_directory(/*ErasedOnReboot=*/true, Tmp);
    sys::path::append(Tmp, "mneme-handoff-" + std::to_string(getuid()));
    Dir = std::string(Tmp);
  }
  sys::fs::create_directories(Dir, /*IgnoreExisting=*/true, sys::fs::perms::owner_all);
  // What the device job leaves here becomes code in the host object: the
  // directory must be ours and closed to others (a shared /tmp).
  struct stat Info;
  if (lstat(Dir.c_str(), &Info) != 0)
    Error = "cannot use the hand-off directory " + Dir + ": " + std::strerror(errno);
  else if (!S_ISDIR(Info.st_mode))
    Error = "the hand-off directory " + Dir + " is not a directory (a link?); remove it";
  else if (Info.st_uid != getuid())
    Error = "the hand-off directory " + Dir + " belongs to another user; remove it or set "
            "MNEME_HANDOFF_DIR to a directory of yours";
  else if (Info.st_mode & (S_IWGRP | S_IWOTH))
    Error = "the hand-off directory " + Dir + " is writable by others; chmod 700 it or set "
            "MNEME_HANDOFF_DIR to a private directory";
  return Dir;
}

std::string handoffKey(const Module &M) {
  if (!HandoffKey.empty())
    return HandoffKey;
  pid_t Driver = driverProcess();
  std::string Identity = std::to_string(Driver) + ":" +
                         processStartTime(Driver) + ":" +
                         M.getSourceFileName();
  return utohexstr(xxh3_64bits(arrayRefFromStringRef(Identity)), /*LowerCase=*/true);
}

std::string handoffPath(StringRef Key, StringRef Arch, std::string &Error) {
  SmallString<256> Path(handoffDirectory(Error));
  sys::path::append(Path, Key + "." + Arch + ".mnir");
  return std::string(Path);
}

std::string writeFileAtomically(StringRef Path, StringRef Contents) {
  SmallString<256> Temp;
  int FD;
  if (std::error_code EC = sys::fs::createUniqueFile(Path + ".tmp-%%%%%%%%", FD, Temp))
    return "cannot create a file next to " + Path.str() + ": " + EC.message();
  {
    raw_fd_ostream Out(FD, /*shouldClose=*/true);
    Out << Contents;
    Out.close();
    if (Out.has_error()) {
      sys::fs::remove(Temp);
      return "cannot write " + Temp.str().str() + ": " + Out.error().message();
    }
  }
  if (std::error_code EC = sys::fs::rename(Temp, Path)) {
    sys::fs::remove(Temp);
    return "cannot rename " + Temp.str().str() + " to " + Path.str() + ": " + EC.message();
  }
  return "";
}

SmallVector<std::string, 2> takeHandoffFiles(StringRef Key, std::string &Error) {
  std::string Dir = handoffDirectory(Error);
  if (!Error.empty())
    return {};
  std::string Prefix = (Key + ".").str();
  std::vector<std::string> Paths;
  std::error_code EC;
  auto Now = std::chrono::system_clock::now();
  for (sys::fs::directory_iterator It(Dir, EC), End; It != End && !EC; It.increment(EC)) {
    StringRef Name = sys::path::filename(It->path());
    if (Name.starts_with(Prefix) && Name.ends_with(".mnir")) {
      Paths.push_back(It->path());
      continue;
    }
    // Records no host job took (a device-only or failed compile), an hour on.
    sys::fs::file_status Status;
    if (Name.contains(".mnir") && !sys::fs::status(It->path(), Status, /*Follow=*/false) &&
        Now - Status.getLastModificationTime() > std::chrono::hours(1))
      sys::fs::remove(It->path());
  }
  if (EC) {
    Error = "cannot list " + Dir + ": " + EC.message();
    return {};
  }
  std::sort(Paths.begin(), Paths.end());
  SmallVector<std::string, 2> Contents;
  for (const std::string &Path : Paths) {
    sys::fs::file_status Status;
    if (sys::fs::status(Path, Status, /*Follow=*/false) ||
        Status.type() != sys::fs::file_type::regular_file) {
      Error = Path + " is not a regular file; remove it";
      return {};
    }
    auto Buffer = MemoryBuffer::getFile(Path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
    if (!Buffer) {
      Error = "cannot read " + Path + ": " + Buffer.getError().message();
      return {};
    }
    Contents.push_back((*Buffer)->getBuffer().str());
    sys::fs::remove(Path);
  }
  return Contents;
}

} // namespace mneme
