// The mneme-cc pass plugin: capture device IR, embed it in the host object.
//
// A CUDA translation unit is compiled twice by one clang driver: once per GPU
// arch for the device (nvptx64) and once for the host.  The device side
// serialises its module before optimisation and leaves it in a hand-off
// file; the host side, which clang always runs after the device side, picks
// the files up and embeds them in the object.  Logic lives in free
// functions; Plugin.cpp wraps them in passes.
#ifndef MNEME_PASSES_H
#define MNEME_PASSES_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace mneme {

// --- Handoff.cpp ---------------------------------------------------------

// The directory shared by the device and host jobs (created mode 0700 if
// needed).  Error is set when it is not a directory of this user's that
// others cannot write.
std::string handoffDirectory(std::string &Error);

// Identifies one translation unit within one clang driver run: both jobs of
// a TU see the same driver process and the same main file name, and no
// other TU, build or parallel job does.
std::string handoffKey(const llvm::Module &M);

// `<dir>/<key>.<arch>.mnir`; Error as for handoffDirectory.
std::string handoffPath(llvm::StringRef Key, llvm::StringRef Arch, std::string &Error);

// Writes Contents to Path through a temporary file and a rename, so a
// reader never sees half a record.  Returns an error message, empty on
// success.
std::string writeFileAtomically(llvm::StringRef Path, llvm::StringRef Contents);

// Reads and deletes every hand-off file for Key, in a stable order, and
// those of other keys that no host job took within an hour.
llvm::SmallVector<std::string, 2> takeHandoffFiles(llvm::StringRef Key,
                                                    std::string &Error);

// --- CodegenOptions.cpp --------------------------------------------------

// The device code-generation options that change results (the `codegen`
// object of the record's metadata; docs/embedded-ir.md lists its keys).
// OptLevel is the pipeline's level ("0".."3", "s", "z"), empty if unknown.
llvm::json::Object describeCodegen(const llvm::Module &M, llvm::StringRef OptLevel);

// The value that follows Flag on cc1's command line; empty when there is
// none or cc1 runs inside the driver process.
std::string cc1Value(llvm::StringRef Flag);

// Whether cc1's command line has Flag; false when cc1 runs inside the
// driver process.
bool cc1HasFlag(llvm::StringRef Flag);

// --- DeviceCapture.cpp ---------------------------------------------------

// Serialises the device module as one embedded-IR record (metadata and
// bitcode) without changing it.  Attributes that only clang's -O0 adds
// (optnone, and the noinline that must accompany it) are left out of the
// copy so that replay can optimise it.
std::string encodeDeviceModule(llvm::Module &M, llvm::StringRef OptLevel);

// Writes the record to the hand-off directory; errors go to the context.
void captureDeviceModule(llvm::Module &M, llvm::StringRef OptLevel);

// Under -fgpu-rdc clang 22 renames a static device variable that host code
// names (cudaMemcpyToSymbol) to `<name>__static__<id>` but leaves the device
// code's uses on an undefined `<name>`, which nvlink refuses.  Points those
// uses at the renamed definition; true when it changed the module.
bool resolveRenamedStatics(llvm::Module &M);

// --- HostEmbed.cpp -------------------------------------------------------

// True for a host module that registers CUDA kernels or variables.
bool isCudaHostModule(const llvm::Module &M);

// True for the host module of relocatable device code (-fgpu-rdc), whose
// kernels only the device link registers.
bool isRelocatableDeviceCode(const llvm::Module &M);

// Embeds Records (already encoded, concatenated) in `.mneme_ir` and adds a
// constructor that hands them to the recorder's hook if one is loaded (and,
// for relocatable device code, calls the device link's DeviceLinkSymbol).
void embedRecords(llvm::Module &M, llvm::StringRef Records);

// Takes the hand-off files for this TU and embeds them; warns when a CUDA
// host module finds none.
void embedHostModule(llvm::Module &M);

} // namespace mneme

#endif
