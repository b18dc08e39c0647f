// SHA-256 (FIPS 180-4): the digest bundles key a kernel's IR by, computed
// by the serving runtime on the IR the application registers, so that it
// matches what `mneme export` computed in Python from the recorded IR.
#ifndef MNEME_SHA256_H
#define MNEME_SHA256_H

#include <cstddef>
#include <string>

namespace mneme::sha256 {

// The digest of Size bytes at Data as 64 lowercase hex digits.
std::string hex(const void *Data, size_t Size);

} // namespace mneme::sha256

#endif
