#include <cstdio>

#include "portable.h"

int main() {
  unsigned counts[16] = {0};
  run_histogram(100000, 16, counts);
  unsigned total = 0, top = 0;
  for (unsigned c : counts) {
    total += c;
    top = c > top ? c : top;
  }
  std::printf("histogram n=100000 total=%u first=%u top=%u\n", total, counts[0], top);
  return 0;
}
