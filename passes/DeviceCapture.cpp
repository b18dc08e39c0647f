// Device side: serialise the unoptimised device module with its metadata.
#include "MnemePasses.h"
#include "Version.h"
#include "mneme/EmbeddedIR.h"

#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/Demangle/Demangle.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {

// NVPTX address spaces of variables the host can name and the recorder can
// snapshot.
const char *addressSpaceName(unsigned AS) {
  switch (AS) {
  case 1:
    return "global";
  case 4:
    return "constant";
  default:
    return nullptr;
  }
}

bool isKernel(const Function &F) {
  return !F.isDeclaration() && F.getCallingConv() == CallingConv::PTX_Kernel;
}

// The arch and PTX features clang compiled for, read off the functions it
// emitted (the module itself does not record them), else off cc1's command
// line: a TU of relocatable device code may define only variables, or
// nothing at all.
std::pair<std::string, std::string> targetOf(const Module &M) {
  for (const Function &F : M)
    if (!F.isDeclaration() && F.hasFnAttribute("target-cpu"))
      return {F.getFnAttribute("target-cpu").getValueAsString().str(),
              F.getFnAttribute("target-features").getValueAsString().str()};
  std::string Arch = mneme::cc1Value("-target-cpu");
  return {Arch.empty() ? "unknown" : Arch, ""};
}

json::Object describe(const Module &M, bool StrippedO0, size_t IRSize, StringRef OptLevel) {
  json::Array Kernels;
  for (const Function &F : M)
    if (isKernel(F))
      Kernels.push_back(json::Object{{"name", F.getName()},
                                     {"demangled", demangle(F.getName())}});
  json::Array Globals;
  const DataLayout &DL = M.getDataLayout();
  for (const GlobalVariable &GV : M.globals()) {
    const char *Space = addressSpaceName(GV.getAddressSpace());
    if (!Space || GV.isDeclaration() || GV.hasPrivateLinkage() ||
        GV.getName().starts_with("llvm."))
      continue;
    Globals.push_back(json::Object{
        {"name", GV.getName()},
        {"demangled", demangle(GV.getName())},
        {"size", static_cast<int64_t>(DL.getTypeAllocSize(GV.getValueType()))},
        {"space", Space},
        {"constant", GV.isConstant()}});
  }
  auto [Arch, Features] = targetOf(M);
  return json::Object{
      {"arch", Arch},
      {"target_features", Features},
      {"triple", M.getTargetTriple().str()},
      {"source", M.getSourceFileName()},
      {"kernels", std::move(Kernels)},
      {"globals", std::move(Globals)},
      {"o0_attributes_removed", StrippedO0},
      {"ir_bytes", static_cast<int64_t>(IRSize)},
      {"codegen", mneme::describeCodegen(M, OptLevel)},
      {"producer", "mneme-cc " MNEME_VERSION " (LLVM " LLVM_VERSION_STRING ")"},
  };
}

} // namespace

namespace mneme {

std::string encodeDeviceModule(Module &M, StringRef OptLevel) {
  // Take optnone/noinline off for the copy, then put them back: the
  // application's own build stays exactly as clang made it.
  SmallVector<Function *, 16> Stripped;
  for (Function &F : M)
    if (F.hasFnAttribute(Attribute::OptimizeNone)) {
      F.removeFnAttr(Attribute::OptimizeNone);
      F.removeFnAttr(Attribute::NoInline);
      Stripped.push_back(&F);
    }
  std::string Bitcode;
  {
    raw_string_ostream Out(Bitcode);
    WriteBitcodeToFile(M, Out, /*ShouldPreserveUseListOrder=*/true);
  }
  for (Function *F : Stripped) {
    F->addFnAttr(Attribute::OptimizeNone);
    F->addFnAttr(Attribute::NoInline);
  }
  std::string Metadata;
  {
    raw_string_ostream Out(Metadata);
    Out << json::Value(describe(M, !Stripped.empty(), Bitcode.size(), OptLevel));
  }
  return embedded_ir::encodeRecord(Metadata, Bitcode);
}

bool resolveRenamedStatics(Module &M) {
  SmallVector<std::pair<GlobalVariable *, GlobalVariable *>, 4> Renamed;
  for (GlobalVariable &Def : M.globals()) {
    size_t At = Def.getName().find("__static__");
    if (Def.isDeclaration() || At == StringRef::npos)
      continue;
    GlobalVariable *Use = M.getGlobalVariable(Def.getName().take_front(At), true);
    if (Use && Use->isDeclaration() && Use->getValueType() == Def.getValueType() &&
        Use->getAddressSpace() == Def.getAddressSpace())
      Renamed.push_back({Use, &Def});
  }
  for (auto [Use, Def] : Renamed) {
    Use->replaceAllUsesWith(Def);
    Use->eraseFromParent();
  }
  return !Renamed.empty();
}

void captureDeviceModule(Module &M, StringRef OptLevel) {
  std::string Arch = targetOf(M).first;
  std::string Error;
  std::string Path = handoffPath(handoffKey(M), Arch, Error);
  if (Error.empty())
    Error = writeFileAtomically(Path, encodeDeviceModule(M, OptLevel));
  if (!Error.empty())
    M.getContext().emitError("mneme: cannot hand the device IR of " +
                             M.getSourceFileName() + " to the host job: " + Error);
}

} // namespace mneme
