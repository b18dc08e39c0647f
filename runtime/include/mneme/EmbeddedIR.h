// The embedded-IR record: how a recordable binary carries its device LLVM IR.
//
// The pass plugin writes one record per translation unit and GPU arch; the
// host object holds a TU's records back to back in the section `.mneme_ir`,
// and hands the same bytes to `__mneme_register_ir_v2(data, size)` at
// start-up when a recorder defines that symbol.  The layout is specified in
// docs/embedded-ir.md; change it only together with FormatVersion.
//
// This file and EmbeddedIR.cpp use the standard library alone, so the
// plugin, the recorder and the Python module share one implementation.
#ifndef MNEME_EMBEDDED_IR_H
#define MNEME_EMBEDDED_IR_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mneme::embedded_ir {

inline constexpr char Magic[8] = {'M', 'N', 'E', 'M', 'E', 'I', 'R', '\0'};
// Version 2 added the `codegen` metadata object; version 1 records (no
// codegen) are still read.
inline constexpr uint32_t FormatVersion = 2;
inline constexpr uint32_t OldestReadableVersion = 1;
inline constexpr size_t HeaderSize = 32;
inline constexpr size_t Alignment = 8;
inline constexpr const char *SectionName = ".mneme_ir";
// Versioned with the format: a recorder that cannot read a record never
// receives it.  Recorders also define the hooks of older versions they read.
inline constexpr const char *RegisterHookName = "__mneme_register_ir_v2";
// Relocatable device code needs a device link (mneme-nvcc's link or -dlink)
// before the program can launch its kernels.  Each such object's start-up
// calls this hidden function, which only the device link defines, so a link
// that skips it fails and names the fix, as nvcc's objects fail without
// their `__cudaRegisterLinkedBinary_*`.
inline constexpr const char *DeviceLinkSymbol =
    "__mneme_rdc_objects_need_a_device_link__link_with_mneme_nvcc_or_run_mneme_nvcc_dlink";

// One decoded record; the views point into the caller's buffer.
struct RecordView {
  uint32_t Version;
  std::string_view Metadata; // UTF-8 JSON object
  std::string_view Bitcode;
  size_t Offset; // of the record within the decoded buffer
};

// 64-bit FNV-1a over Metadata then Bitcode: integrity, not identity.
uint64_t checksum(std::string_view Metadata, std::string_view Bitcode);

// Serialises one record, padded to Alignment.
std::string encodeRecord(std::string_view Metadata, std::string_view Bitcode);

// Decodes every record in Data (zero padding between records is skipped).
// Returns false and sets Error (naming the offset) on a malformed buffer.
bool decodeRecords(const void *Data, size_t Size, std::vector<RecordView> &Out,
                   std::string &Error);

} // namespace mneme::embedded_ir

#endif
