/* A C program with no CUDA in it: mneme-cc must build it exactly as clang. */
#include <stdio.h>

static unsigned collatz_steps(unsigned long long n) {
  unsigned steps = 0;
  while (n != 1) {
    n = (n & 1) ? 3 * n + 1 : n / 2;
    ++steps;
  }
  return steps;
}

int main(void) {
  unsigned best = 0, arg = 0;
  for (unsigned i = 1; i < 100000; ++i) {
    unsigned s = collatz_steps(i);
    if (s > best) {
      best = s;
      arg = i;
    }
  }
  printf("longest collatz chain below 100000: %u steps from %u\n", best, arg);
  return 0;
}
