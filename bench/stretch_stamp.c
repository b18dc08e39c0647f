/* Preloaded by run_stretches.py into every process of a run: stamps the
 * library's load and an exit handler registered with no library attached,
 * which runs after every exit handler and every library's destructors (the
 * CUDA runtime's and the recorder's exit work included); one registered
 * with atexit() here would run as this library unloads, before libraries
 * unloaded after it. Each process appends "<pid> <load ns> <last ns> <exe>"
 * (CLOCK_MONOTONIC) to $MNEME_STAMP_FILE at that moment. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long Loaded;

static long long nowNs(void) {
  struct timespec T;
  clock_gettime(CLOCK_MONOTONIC, &T);
  return T.tv_sec * 1000000000LL + T.tv_nsec;
}

static void lastHandler(void *Unused) {
  (void)Unused;
  long long Now = nowNs();
  const char *Path = getenv("MNEME_STAMP_FILE");
  if (!Path)
    return;
  char Exe[PATH_MAX] = "?";
  ssize_t Length = readlink("/proc/self/exe", Exe, sizeof Exe - 1);
  if (Length > 0)
    Exe[Length] = 0;
  char Line[PATH_MAX + 96];
  int N = snprintf(Line, sizeof Line, "%d %lld %lld %s\n", (int)getpid(), Loaded, Now, Exe);
  int Fd = open(Path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (Fd >= 0) {
    if (write(Fd, Line, N) != N) {
    }
    close(Fd);
  }
}

extern int __cxa_atexit(void (*Handler)(void *), void *Argument, void *Library);

__attribute__((constructor)) static void onLoad(void) {
  Loaded = nowNs();
  __cxa_atexit(lastHandler, NULL, NULL);
}
