#include "mneme/ContentHash.h"

#include <cstring>

namespace mneme::content_hash {

Digest hash(const void *Data, size_t Size) {
  const auto *Bytes = static_cast<const unsigned char *>(Data);
  uint64_t Lo = 0, Hi = 0;
  size_t Words = Size / 8;
  for (size_t I = 0; I < Words; ++I) {
    uint64_t W;
    std::memcpy(&W, Bytes + 8 * I, 8); // little-endian hosts only (x86-64, aarch64)
    absorb(W, I, Lo, Hi);
  }
  if (size_t Tail = Size % 8) {
    uint64_t W = 0;
    std::memcpy(&W, Bytes + 8 * Words, Tail);
    absorb(W, Words, Lo, Hi);
  }
  return finish(Lo, Hi, Size);
}

std::string toHex(const Digest &D) {
  static const char Digits[] = "0123456789abcdef";
  std::string Out(32, '0');
  for (int I = 0; I < 16; ++I) {
    Out[15 - I] = Digits[(D.Hi >> (4 * I)) & 15];
    Out[31 - I] = Digits[(D.Lo >> (4 * I)) & 15];
  }
  return Out;
}

bool fromHex(const std::string &Text, Digest &D) {
  if (Text.size() != 32)
    return false;
  uint64_t Parts[2] = {0, 0};
  for (size_t I = 0; I < 32; ++I) {
    char C = Text[I];
    unsigned V;
    if (C >= '0' && C <= '9')
      V = C - '0';
    else if (C >= 'a' && C <= 'f')
      V = C - 'a' + 10;
    else
      return false;
    Parts[I / 16] = (Parts[I / 16] << 4) | V;
  }
  D.Hi = Parts[0];
  D.Lo = Parts[1];
  return true;
}

} // namespace mneme::content_hash
