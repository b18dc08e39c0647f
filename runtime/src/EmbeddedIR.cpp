#include "mneme/EmbeddedIR.h"

#include <cstring>

namespace mneme::embedded_ir {

namespace {

void putLE(std::string &Out, uint64_t Value, int Bytes) {
  for (int I = 0; I < Bytes; ++I)
    Out.push_back(static_cast<char>((Value >> (8 * I)) & 0xff));
}

uint64_t getLE(const unsigned char *P, int Bytes) {
  uint64_t Value = 0;
  for (int I = 0; I < Bytes; ++I)
    Value |= static_cast<uint64_t>(P[I]) << (8 * I);
  return Value;
}

size_t alignUp(size_t N) { return (N + Alignment - 1) / Alignment * Alignment; }

} // namespace

uint64_t checksum(std::string_view Metadata, std::string_view Bitcode) {
  uint64_t Hash = 0xcbf29ce484222325ull;
  for (std::string_view Part : {Metadata, Bitcode})
    for (unsigned char C : Part) {
      Hash ^= C;
      Hash *= 0x100000001b3ull;
    }
  return Hash;
}

std::string encodeRecord(std::string_view Metadata, std::string_view Bitcode) {
  std::string Out(Magic, sizeof(Magic));
  putLE(Out, FormatVersion, 4);
  putLE(Out, Metadata.size(), 4);
  putLE(Out, Bitcode.size(), 8);
  putLE(Out, checksum(Metadata, Bitcode), 8);
  Out.append(Metadata);
  Out.append(Bitcode);
  Out.resize(alignUp(Out.size()), '\0');
  return Out;
}

bool decodeRecords(const void *Data, size_t Size, std::vector<RecordView> &Out,
                   std::string &Error) {
  const auto *Bytes = static_cast<const unsigned char *>(Data);
  size_t Pos = 0;
  while (Pos < Size) {
    // The linker may pad between objects' sections: skip zero words.
    if (Bytes[Pos] == 0) {
      ++Pos;
      continue;
    }
    auto Fail = [&](const std::string &Why) {
      Error = "embedded IR record at offset " + std::to_string(Pos) + ": " + Why;
      return false;
    };
    if (Size - Pos < HeaderSize)
      return Fail("truncated header");
    if (std::memcmp(Bytes + Pos, Magic, sizeof(Magic)) != 0)
      return Fail("bad magic (not a mneme-cc record)");
    uint32_t Version = static_cast<uint32_t>(getLE(Bytes + Pos + 8, 4));
    if (Version < OldestReadableVersion || Version > FormatVersion)
      return Fail("format version " + std::to_string(Version) +
                  " is not supported (this build reads versions " +
                  std::to_string(OldestReadableVersion) + " to " +
                  std::to_string(FormatVersion) +
                  "); rebuild the binary with this mneme-cc");
    uint64_t MetaSize = getLE(Bytes + Pos + 12, 4);
    uint64_t IRSize = getLE(Bytes + Pos + 16, 8);
    uint64_t Stored = getLE(Bytes + Pos + 24, 8);
    if (MetaSize > Size - Pos - HeaderSize ||
        IRSize > Size - Pos - HeaderSize - MetaSize)
      return Fail("truncated payload");
    const char *Payload = reinterpret_cast<const char *>(Bytes + Pos + HeaderSize);
    std::string_view Metadata(Payload, MetaSize);
    std::string_view Bitcode(Payload + MetaSize, IRSize);
    if (checksum(Metadata, Bitcode) != Stored)
      return Fail("checksum mismatch (the binary is corrupt)");
    Out.push_back({Version, Metadata, Bitcode, Pos});
    Pos += alignUp(HeaderSize + MetaSize + IRSize);
  }
  return true;
}

} // namespace mneme::embedded_ir
