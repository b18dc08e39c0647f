// mneme-record: `mneme record`'s native launcher. It checks the options,
// creates the record database, preloads the recorder ahead of the user's own
// LD_PRELOAD entries and runs the application, passing on the signals sent
// to it; no interpreter stands between the user and the application.
#include "RecordOptions.h"

#include "mneme/SnapshotStore.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace {

using mneme::launcher::RecordOptions;

constexpr int ExitUsage = 2;

int fail(const std::string &Message) {
  std::fprintf(stderr, "mneme: error: %s\n", Message.c_str());
  return ExitUsage;
}

std::string directoryOf(const std::string &Path) {
  size_t Slash = Path.rfind('/');
  return Slash == std::string::npos ? "." : Path.substr(0, Slash);
}

// The recorder is installed beside the launcher in mneme_cc/lib; the copy of
// the launcher in the environment's scripts directory (<prefix>/bin) finds it
// in that environment's package directory.
std::string findRecorder(const std::string &Directory) {
  const std::string Package = "/mneme_cc/lib/" MNEME_RECORDER_FILE;
  const std::string Candidates[] = {
      Directory + "/" MNEME_RECORDER_FILE,
      Directory + "/../lib/" MNEME_PYTHON_DIR "/site-packages" + Package,
      Directory + "/../lib/" MNEME_PYTHON_DIR "/dist-packages" + Package,
      Directory + "/../lib/python3/dist-packages" + Package,
      Directory + "/.." + Package, // pip install --target DIR: DIR/bin beside DIR/mneme_cc
  };
  for (const std::string &Path : Candidates) {
    char Real[PATH_MAX];
    if (access(Path.c_str(), R_OK) == 0 && realpath(Path.c_str(), Real))
      return Real;
  }
  return "";
}

std::string absolute(const std::string &Path) {
  if (!Path.empty() && Path[0] == '/')
    return Path;
  char Cwd[4096];
  return getcwd(Cwd, sizeof Cwd) ? std::string(Cwd) + "/" + Path : Path;
}

bool isExecutableFile(const std::string &Path) {
  struct stat S;
  return stat(Path.c_str(), &S) == 0 && S_ISREG(S.st_mode) && access(Path.c_str(), X_OK) == 0;
}

// The file `Name` runs, searched in PATH as a shell would; empty if none.
std::string findProgram(const std::string &Name) {
  if (Name.find('/') != std::string::npos)
    return isExecutableFile(Name) ? Name : "";
  const char *Path = std::getenv("PATH");
  std::string_view Dirs = Path ? Path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    size_t Colon = Dirs.find(':');
    std::string Dir(Dirs.substr(0, Colon));
    std::string Candidate = (Dir.empty() ? "." : Dir) + "/" + Name;
    if (isExecutableFile(Candidate))
      return Candidate;
    if (Colon == std::string_view::npos)
      return "";
    Dirs.remove_prefix(Colon + 1);
  }
}

size_t instanceCount(const std::string &Database) {
  size_t N = 0;
  if (DIR *D = opendir((Database + "/index").c_str())) {
    while (dirent *E = readdir(D)) {
      std::string_view Name = E->d_name;
      N += Name.size() > 5 && Name.substr(Name.size() - 5) == ".json";
    }
    closedir(D);
  }
  return N;
}

// What another process creating the same database leaves before its
// marker is in place (ranks of one job start together).
bool partOfANewDatabase(const char *Name) {
  return !std::strcmp(Name, ".") || !std::strcmp(Name, "..") || !std::strcmp(Name, "index") ||
         !std::strcmp(Name, "chunks") || !std::strncmp(Name, "database.json.tmp.", 18);
}

// Creates the database before the application starts, so that it is
// readable from its first moment on (the recorder opens the same one).
bool prepareDatabase(const std::string &Dir, std::string &Error) {
  struct stat S;
  if (stat(Dir.c_str(), &S) == 0 && !S_ISDIR(S.st_mode)) {
    Error = "the record database " + Dir + " is not a directory: choose another -rdb directory";
    return false;
  }
  if (!mneme::store::makeDirectories(Dir, Error)) {
    Error = "cannot create the record database: " + Error;
    return false;
  }
  if (access(Dir.c_str(), W_OK | X_OK) != 0) {
    Error = "the record database " + Dir + " is not writable: choose another -rdb directory";
    return false;
  }
  bool Foreign = false;
  if (DIR *D = opendir(Dir.c_str())) {
    while (dirent *E = readdir(D))
      Foreign |= !partOfANewDatabase(E->d_name);
    closedir(D);
  }
  if (Foreign && access((Dir + "/database.json").c_str(), F_OK) != 0) {
    Error = Dir + " is not empty and is not a record database: choose another -rdb directory";
    return false;
  }
  return mneme::store::initDatabase(Dir, Error);
}

// A program that carries the static CUDA runtime and loads no shared one:
// its launches reach the recorder only through the driver's entry points.
bool linksStaticCudaRuntime(const std::string &Program) {
  int Fd = open(Program.c_str(), O_RDONLY | O_CLOEXEC);
  if (Fd < 0)
    return false;
  struct stat S;
  bool Static = false;
  if (fstat(Fd, &S) == 0 && S.st_size > 0) {
    void *Map = mmap(nullptr, S.st_size, PROT_READ, MAP_PRIVATE, Fd, 0);
    if (Map != MAP_FAILED) {
      std::string_view Data(static_cast<const char *>(Map), S.st_size);
      Static = Data.find("libcudart_static_") != std::string_view::npos &&
               Data.find("libcudart.so") == std::string_view::npos;
      munmap(Map, S.st_size);
    }
  }
  close(Fd);
  return Static;
}

std::string whyNothing(const std::string &Program) {
  if (linksStaticCudaRuntime(Program))
    return Program + " links the CUDA runtime statically and none of its launches reached "
           "the recorder (it sees them through the driver's entry points, on x86-64 Linux); "
           "the shared runtime is interposed directly (mneme-nvcc and mneme-cxx link it; "
           "CMake: CUDA_RUNTIME_LIBRARY Shared; nvcc: -cudart shared)";
  return "no kernel launch reached the recorder (none was launched, none matched --kernels, "
         "--skip skipped them all, this rank is not among --ranks, or the database holds "
         "every instance launched already)";
}

double milliseconds(const timeval &T) { return T.tv_sec * 1e3 + T.tv_usec / 1e3; }

// CPU time, the `mneme` entry point's included: it exec'd this launcher in
// the same process. (Its wall time is bench/record_overhead.py's to measure.)
void reportStart() {
  rusage U;
  getrusage(RUSAGE_SELF, &U);
  std::fprintf(stderr,
               "mneme: %.1f ms of CPU in mneme record (its entry point, the checks, the "
               "database) before the application starts\n",
               milliseconds(U.ru_utime) + milliseconds(U.ru_stime));
}

// Runs the application with the given environment; signals sent to the
// launcher reach it, and it decides what they mean. Its exit status, or
// 128+N for signal N.
int runForwardingSignals(const std::string &Program, const std::vector<std::string> &Argv,
                         std::vector<std::string> &Environment, std::string &Error) {
  sigset_t Waited, Previous;
  sigemptyset(&Waited);
  for (int S : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD})
    sigaddset(&Waited, S);
  // An ignored SIGCHLD (inherited) would have the kernel reap the child
  // before waitpid sees it; the application gets the disposition back.
  struct sigaction Default = {}, ChildAction;
  Default.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &Default, &ChildAction);
  // Blocked from before the start, so that none is lost or kills the
  // launcher; the application starts with the mask it would have had.
  sigprocmask(SIG_BLOCK, &Waited, &Previous);
  std::vector<char *> Args, Env;
  for (const std::string &A : Argv)
    Args.push_back(const_cast<char *>(A.c_str()));
  Args.push_back(nullptr);
  for (std::string &E : Environment)
    Env.push_back(E.data());
  Env.push_back(nullptr);
  int Pipe[2]; // carries errno if exec fails
  if (pipe2(Pipe, O_CLOEXEC) != 0) {
    Error = std::string("cannot start the application: ") + std::strerror(errno);
    return -1;
  }
  pid_t Child = fork();
  if (Child == 0) {
    sigaction(SIGCHLD, &ChildAction, nullptr);
    sigprocmask(SIG_SETMASK, &Previous, nullptr);
    execve(Program.c_str(), Args.data(), Env.data());
    int Code = errno;
    (void)!write(Pipe[1], &Code, sizeof Code);
    _exit(127);
  }
  close(Pipe[1]);
  if (Child < 0) {
    close(Pipe[0]);
    Error = std::string("cannot start the application: ") + std::strerror(errno);
    return -1;
  }
  int ExecError = 0;
  ssize_t Got;
  do
    Got = read(Pipe[0], &ExecError, sizeof ExecError);
  while (Got < 0 && errno == EINTR);
  close(Pipe[0]);
  int Status = 0;
  if (Got == sizeof ExecError) {
    waitpid(Child, &Status, 0);
    sigprocmask(SIG_SETMASK, &Previous, nullptr);
    Error = Argv[0] + ": cannot run it: " + std::strerror(ExecError);
    return -1;
  }
  while (true) {
    pid_t Done = waitpid(Child, &Status, WNOHANG);
    if (Done == Child || (Done < 0 && errno == ECHILD))
      break;
    siginfo_t Info;
    timespec Second{1, 0};
    int S = sigtimedwait(&Waited, &Info, &Second);
    if (S <= 0 || S == SIGCHLD)
      continue;
    // A signal the kernel sent (a terminal's Ctrl-C, hangup) went to the
    // whole foreground process group: an application still in ours has it.
    if (Info.si_code == SI_KERNEL && getpgid(Child) == getpgrp())
      continue;
    kill(Child, S);
  }
  timespec Zero{0, 0};
  while (sigtimedwait(&Waited, nullptr, &Zero) > 0) {
    // what arrived as it ended was the application's to handle
  }
  sigprocmask(SIG_SETMASK, &Previous, nullptr);
  return WIFSIGNALED(Status) ? 128 + WTERMSIG(Status) : WEXITSTATUS(Status);
}

} // namespace

int main(int Argc, char **Argv) {
  std::vector<std::string> Args(Argv + 1, Argv + Argc);
  if (std::getenv("MNEME_RECORD_LIST_FLAGS")) { // for the CLI's tests: the flags it takes
    for (const std::string &F : mneme::launcher::recordFlags())
      std::printf("%s\n", F.c_str());
    return 0;
  }
  RecordOptions O;
  std::string Error;
  if (!mneme::launcher::parseRecordOptions(Args, O, Error))
    return fail(Error);
  std::string Program = findProgram(O.Command[0]);
  if (Program.empty())
    return fail(O.Command[0] + ": no such program (or not executable)");
  char Self[4096];
  ssize_t N = readlink("/proc/self/exe", Self, sizeof Self - 1);
  std::string Recorder = findRecorder(directoryOf(N > 0 ? std::string(Self, N)
                                                         : absolute(Argv[0])));
  if (Recorder.empty())
    return fail("the recorder " MNEME_RECORDER_FILE " is not beside " +
                std::string(N > 0 ? std::string(Self, N) : Argv[0]) +
                " nor in the mneme_cc package of its environment: reinstall mneme-cc");
  if (Recorder.find_first_of(" :") != std::string::npos) // LD_PRELOAD splits there
    return fail("the recorder " + Recorder + " lies under a path with a space or a colon, "
                "which LD_PRELOAD cannot name: install mneme-cc elsewhere");
  if (!prepareDatabase(O.Database, Error))
    return fail(Error);

  // The recorder's settings are the command line's: variables of the same
  // names inherited from the caller are dropped, the rest passed on.
  std::vector<std::pair<std::string, std::string>> Settings = O.environment();
  Settings.emplace_back("MNEME_RDB", absolute(O.Database));
  std::vector<std::string> Environment;
  const char *Preload = std::getenv("LD_PRELOAD");
  for (char **E = environ; *E; ++E) {
    std::string_view V = *E;
    std::string_view Name = V.substr(0, V.find('='));
    bool Replaced = Name == "LD_PRELOAD";
    for (const char *Own : mneme::launcher::recorderVariables())
      Replaced |= Name == Own;
    if (!Replaced)
      Environment.emplace_back(V);
  }
  for (const auto &[Name, Value] : Settings)
    Environment.push_back(Name + "=" + Value);
  Environment.push_back("LD_PRELOAD=" + Recorder +
                        (Preload && *Preload ? ":" + std::string(Preload) : ""));

  size_t Before = instanceCount(O.Database);
  // With --verbose the recorder's timeline counts from here (the same clock).
  const auto Launched = std::chrono::steady_clock::now();
  if (O.Verbose) {
    reportStart();
    Environment.push_back(
        "MNEME_LAUNCHED_NS=" +
        std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           Launched.time_since_epoch())
                           .count()));
  }
  int Code = runForwardingSignals(Program, O.Command, Environment, Error);
  if (Code < 0)
    return fail(Error);
  if (O.Verbose)
    std::fprintf(stderr, "mneme: the application ran %.1f ms (from its start to its exit)\n",
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                           Launched)
                     .count());
  if (instanceCount(O.Database) == Before)
    std::fprintf(stderr, "mneme: warning: recorded no instance: %s\n",
                 whyNothing(Program).c_str());
  return Code;
}
