/* mneme-nvcc: what nvcc's headers give CUDA code and clang's do not.
 *
 * Host versions of CUDA's min and max overloads:
 * nvcc's headers give host code the min/max overloads of integer and
 * floating types (and umin, llmin, ...); clang's CUDA headers make them
 * device-only, so host code that calls min(a, b) on floats or ints builds
 * with nvcc and not with clang.  mneme-nvcc force-includes this file in
 * CUDA compiles; it declares the host side of the same overload set, with
 * nvcc's semantics (fminf/fmaxf for floating types). */
#ifndef MNEME_NVCC_H
#define MNEME_NVCC_H
#if defined(__cplusplus) && defined(__CUDA__) && defined(__clang__)
#include <math.h>
/* Device code may use new and delete without <new>, as with nvcc: clang's
 * device operators come with its <new>. */
#include <new>

#define MNEME_HOST static inline __attribute__((host))

MNEME_HOST int min(int a, int b) { return a < b ? a : b; }
MNEME_HOST unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
MNEME_HOST long long int llmin(long long int a, long long int b) { return a < b ? a : b; }
MNEME_HOST unsigned long long int ullmin(unsigned long long int a, unsigned long long int b) {
  return a < b ? a : b;
}
MNEME_HOST int max(int a, int b) { return a > b ? a : b; }
MNEME_HOST unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
MNEME_HOST long long int llmax(long long int a, long long int b) { return a > b ? a : b; }
MNEME_HOST unsigned long long int ullmax(unsigned long long int a, unsigned long long int b) {
  return a > b ? a : b;
}

MNEME_HOST unsigned int min(unsigned int a, unsigned int b) { return umin(a, b); }
MNEME_HOST unsigned int min(int a, unsigned int b) { return umin((unsigned int)a, b); }
MNEME_HOST unsigned int min(unsigned int a, int b) { return umin(a, (unsigned int)b); }
MNEME_HOST long int min(long int a, long int b) { return a < b ? a : b; }
MNEME_HOST unsigned long int min(unsigned long int a, unsigned long int b) { return a < b ? a : b; }
MNEME_HOST unsigned long int min(long int a, unsigned long int b) {
  return min((unsigned long int)a, b);
}
MNEME_HOST unsigned long int min(unsigned long int a, long int b) {
  return min(a, (unsigned long int)b);
}
MNEME_HOST long long int min(long long int a, long long int b) { return llmin(a, b); }
MNEME_HOST unsigned long long int min(unsigned long long int a, unsigned long long int b) {
  return ullmin(a, b);
}
MNEME_HOST unsigned long long int min(long long int a, unsigned long long int b) {
  return ullmin((unsigned long long int)a, b);
}
MNEME_HOST unsigned long long int min(unsigned long long int a, long long int b) {
  return ullmin(a, (unsigned long long int)b);
}
MNEME_HOST float min(float a, float b) { return fminf(a, b); }
MNEME_HOST double min(double a, double b) { return fmin(a, b); }
MNEME_HOST double min(float a, double b) { return fmin((double)a, b); }
MNEME_HOST double min(double a, float b) { return fmin(a, (double)b); }

MNEME_HOST unsigned int max(unsigned int a, unsigned int b) { return umax(a, b); }
MNEME_HOST unsigned int max(int a, unsigned int b) { return umax((unsigned int)a, b); }
MNEME_HOST unsigned int max(unsigned int a, int b) { return umax(a, (unsigned int)b); }
MNEME_HOST long int max(long int a, long int b) { return a > b ? a : b; }
MNEME_HOST unsigned long int max(unsigned long int a, unsigned long int b) { return a > b ? a : b; }
MNEME_HOST unsigned long int max(long int a, unsigned long int b) {
  return max((unsigned long int)a, b);
}
MNEME_HOST unsigned long int max(unsigned long int a, long int b) {
  return max(a, (unsigned long int)b);
}
MNEME_HOST long long int max(long long int a, long long int b) { return llmax(a, b); }
MNEME_HOST unsigned long long int max(unsigned long long int a, unsigned long long int b) {
  return ullmax(a, b);
}
MNEME_HOST unsigned long long int max(long long int a, unsigned long long int b) {
  return ullmax((unsigned long long int)a, b);
}
MNEME_HOST unsigned long long int max(unsigned long long int a, long long int b) {
  return ullmax(a, (unsigned long long int)b);
}
MNEME_HOST float max(float a, float b) { return fmaxf(a, b); }
MNEME_HOST double max(double a, double b) { return fmax(a, b); }
MNEME_HOST double max(float a, double b) { return fmax((double)a, b); }
MNEME_HOST double max(double a, float b) { return fmax(a, (double)b); }

#undef MNEME_HOST

/* nan() and nanf() on the device: clang's CUDA headers declare them (static,
 * device) and, with CUDA 13's headers, nothing defines them, so device code
 * that calls them does not link.  nvcc maps them to libdevice, as here. */
#define MNEME_DEVICE static __inline__ __attribute__((always_inline)) __attribute__((device))
MNEME_DEVICE double nan(const char *tag) { return __nv_nan((const signed char *)tag); }
MNEME_DEVICE float nanf(const char *tag) { return __nv_nanf((const signed char *)tag); }
#undef MNEME_DEVICE

/* A class with a pure virtual function, used on the device, puts
 * __cxa_pure_virtual in its vtable; nvcc's device runtime defines it, clang's
 * does not.  Calling it is a bug in the program: it traps, as nvcc's does. */
#if defined(__CUDA_ARCH__)
extern "C" __attribute__((device)) inline void __cxa_pure_virtual(void) { __trap(); }
#endif
#endif
#endif
