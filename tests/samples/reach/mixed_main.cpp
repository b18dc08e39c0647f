#include <cstdio>

#include "portable.h"

int main() {
  long long sum = 0;
  run_mixed(1 << 16, 2.5f, 3, &sum);
  std::printf("mixed n=65536 sum=%lld check=%u\n", sum, mix(12345u));
  return 0;
}
