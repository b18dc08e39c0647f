#include <cstdio>

#include "portable.h"

int main() {
  int last = 0;
  long long sum = run_scan(10000, &last);
  std::printf("scan n=10000 sum=%lld last=%d\n", sum, last);
  return 0;
}
