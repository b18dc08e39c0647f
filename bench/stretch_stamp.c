/* Preloaded by run_stretches.py into every process of a run: stamps the
 * library's load and its exit handler, which, registered before the C
 * library registers the destructors of the loaded libraries, runs after all
 * of them (the CUDA runtime's and the recorder's exit work included). Each
 * process appends "<load ns> <last handler ns>" (CLOCK_MONOTONIC) to
 * $MNEME_STAMP_FILE at that moment. */
#define _GNU_SOURCE
#include <fcntl.h>
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

static void lastHandler(void) {
  long long Now = nowNs();
  const char *Path = getenv("MNEME_STAMP_FILE");
  if (!Path)
    return;
  char Line[64];
  int N = snprintf(Line, sizeof Line, "%lld %lld\n", Loaded, Now);
  int Fd = open(Path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (Fd >= 0) {
    if (write(Fd, Line, N) != N) {
    }
    close(Fd);
  }
}

__attribute__((constructor)) static void onLoad(void) {
  Loaded = nowNs();
  atexit(lastHandler);
}
