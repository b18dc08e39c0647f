// Host side: embed the handed-over records and the registration hook.
#include "MnemePasses.h"
#include "mneme/EmbeddedIR.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

using namespace llvm;

namespace {

// Runs before the default-priority constructors, so the recorder holds a
// TU's IR before CUDA registers that TU's kernels (priorities up to 100 are
// reserved for the implementation).
constexpr int RegisterPriority = 101;

bool registersItsOwnFatbinary(const Module &M) {
  return M.getFunction("__cuda_register_globals") || M.getFunction("__cuda_module_ctor");
}

// Relocatable device code (-fgpu-rdc) goes through clang's offload driver:
// the host module lists its kernels and variables as offload entries and
// the registration code is only made at the link.
bool hasOffloadEntries(const Module &M) {
  for (const GlobalVariable &GV : M.globals())
    if (GV.getSection() == "llvm_offload_entries" ||
        GV.getSection() == "cuda_offloading_entries")
      return true;
  return false;
}

} // namespace

namespace mneme {

bool isCudaHostModule(const Module &M) {
  return registersItsOwnFatbinary(M) || hasOffloadEntries(M);
}

bool isRelocatableDeviceCode(const Module &M) {
  // A TU of only __device__ functions has neither registration nor entries;
  // cc1's -fgpu-rdc tells.
  return !registersItsOwnFatbinary(M) && (hasOffloadEntries(M) || cc1HasFlag("-fgpu-rdc"));
}

void embedRecords(Module &M, StringRef Records) {
  LLVMContext &Ctx = M.getContext();
  Constant *Data = ConstantDataArray::getString(Ctx, Records, /*AddNull=*/false);
  auto *Blob = new GlobalVariable(M, Data->getType(), /*isConstant=*/true,
                                  GlobalValue::PrivateLinkage, Data, "__mneme_ir");
  Blob->setSection(embedded_ir::SectionName);
  Blob->setAlignment(Align(embedded_ir::Alignment));
  appendToUsed(M, {Blob});

  // void ctor() { if (auto *Hook = dlsym(RTLD_DEFAULT, name)) Hook(data, size); }
  // dlsym keeps the hook free when no recorder is loaded and works in
  // executables and shared libraries alike, PIE or not.
  Type *Ptr = PointerType::getUnqual(Ctx);
  Type *I64 = Type::getInt64Ty(Ctx);
  FunctionCallee Dlsym =
      M.getOrInsertFunction("dlsym", FunctionType::get(Ptr, {Ptr, Ptr}, false));
  auto *Ctor = Function::Create(FunctionType::get(Type::getVoidTy(Ctx), false),
                                GlobalValue::InternalLinkage,
                                "__mneme_register_ir", M);
  auto *Entry = BasicBlock::Create(Ctx, "entry", Ctor);
  auto *Call = BasicBlock::Create(Ctx, "register", Ctor);
  auto *Done = BasicBlock::Create(Ctx, "done", Ctor);
  IRBuilder<> B(Entry);
  Value *Name = B.CreateGlobalString(embedded_ir::RegisterHookName, "__mneme_hook_name");
  Value *Hook = B.CreateCall(Dlsym, {ConstantPointerNull::get(cast<PointerType>(Ptr)), Name});
  if (isRelocatableDeviceCode(M)) {
    // Relocatable device code: only the device link registers this TU's
    // kernels, and only the device link defines this symbol.
    Function *Linked = Function::Create(FunctionType::get(Type::getVoidTy(Ctx), false),
                                        GlobalValue::ExternalLinkage,
                                        embedded_ir::DeviceLinkSymbol, M);
    Linked->setVisibility(GlobalValue::HiddenVisibility);
    B.CreateCall(Linked);
  }
  B.CreateCondBr(B.CreateIsNotNull(Hook), Call, Done);
  B.SetInsertPoint(Call);
  B.CreateCall(FunctionType::get(Type::getVoidTy(Ctx), {Ptr, I64}, false), Hook,
               {Blob, ConstantInt::get(I64, Records.size())});
  B.CreateBr(Done);
  B.SetInsertPoint(Done);
  B.CreateRetVoid();
  appendToGlobalCtors(M, Ctor, RegisterPriority);
}

void embedHostModule(Module &M) {
  std::string Error;
  SmallVector<std::string, 2> Records = takeHandoffFiles(handoffKey(M), Error);
  if (!Error.empty()) {
    M.getContext().emitError("mneme: " + Error);
    return;
  }
  if (Records.empty()) {
    if (isCudaHostModule(M))
      M.getContext().diagnose(DiagnosticInfoGeneric(
          "mneme: no device IR was handed over for " + M.getSourceFileName() +
              "; this object carries none (was the device side compiled, "
              "with the mneme plugin?)",
          DS_Warning));
    return;
  }
  std::string All;
  for (const std::string &R : Records)
    All += R;
  embedRecords(M, All);
}

} // namespace mneme
