// The device code-generation options that change what a kernel computes.
//
// Most of them are in the module already (fast-math flags on instructions,
// denormal-mode attributes, the reflect module flags) and replay sees them
// there.  Two are not: the -O level (the plugin gets it from the pass
// builder) and the back end's contraction mode (clang's -ffp-contract sets
// TargetOptions, not the IR).  When cc1 runs as its own process (the mneme
// drivers ask for that) its command line is clang's own resolution of the
// user's flags and is read as such; otherwise the mode is inferred from the
// module's instructions and the description says so.
#include "MnemePasses.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Operator.h"

#include <fstream>
#include <sstream>

using namespace llvm;

namespace {

// cc1's arguments, or nothing when cc1 runs inside the driver process.
std::vector<std::string> cc1Arguments() {
  std::ifstream In("/proc/self/cmdline", std::ios::binary);
  std::stringstream S;
  S << In.rdbuf();
  std::vector<std::string> Args;
  std::string Arg;
  for (char C : S.str()) {
    if (C == '\0') {
      Args.push_back(Arg);
      Arg.clear();
    } else {
      Arg.push_back(C);
    }
  }
  if (Args.size() < 2 || Args[1] != "-cc1")
    return {};
  return Args;
}

struct CommandLine {
  std::vector<std::string> Args;
  bool has(StringRef Flag) const {
    for (const std::string &A : Args)
      if (A == Flag)
        return true;
    return false;
  }
  // The value of the last `Prefix<value>`, or Default.
  std::string last(StringRef Prefix, StringRef Default) const {
    std::string Value = Default.str();
    for (const std::string &A : Args)
      if (StringRef(A).starts_with(Prefix))
        Value = A.substr(Prefix.size());
    return Value;
  }
  json::Array mllvm() const {
    json::Array Out;
    for (size_t I = 0; I + 1 < Args.size(); ++I)
      if (Args[I] == "-mllvm")
        Out.push_back(Args[I + 1]);
    return Out;
  }
};

} // namespace

namespace mneme {

bool cc1HasFlag(StringRef Flag) {
  for (const std::string &A : cc1Arguments())
    if (A == Flag)
      return true;
  return false;
}

std::string cc1Value(StringRef Flag) {
  std::vector<std::string> Args = cc1Arguments();
  for (size_t I = 0; I + 1 < Args.size(); ++I)
    if (Args[I] == Flag)
      return Args[I + 1];
  return "";
}

} // namespace mneme

namespace {

// Libdevice's functions (linked in before the pipeline) carry no flags of
// the user's: they would hide what the user's code was compiled with.
bool isUserFunction(const Function &F) {
  return !F.isDeclaration() && !F.getName().starts_with("__nv_");
}

struct Observed {
  bool Contract = false, MulAdd = false, FPArith = false;
  bool Reassoc = false, Arcp = false, Afn = false, NoNaNs = false, NoInfs = false,
       NoSignedZeros = false;
};

Observed observe(const Module &M) {
  Observed O;
  for (const Function &F : M) {
    if (!isUserFunction(F))
      continue;
    for (const Instruction &I : instructions(F)) {
      if (const auto *II = dyn_cast<IntrinsicInst>(&I))
        if (II->getIntrinsicID() == Intrinsic::fmuladd)
          O.MulAdd = true;
      if (!isa<FPMathOperator>(&I))
        continue;
      unsigned Op = I.getOpcode();
      if (Op == Instruction::FAdd || Op == Instruction::FSub || Op == Instruction::FMul)
        O.FPArith = true;
      FastMathFlags FMF = I.getFastMathFlags();
      O.Contract |= FMF.allowContract();
      O.Reassoc |= FMF.allowReassoc();
      O.Arcp |= FMF.allowReciprocal();
      O.Afn |= FMF.approxFunc();
      O.NoNaNs |= FMF.noNaNs();
      O.NoInfs |= FMF.noInfs();
      O.NoSignedZeros |= FMF.noSignedZeros();
    }
  }
  return O;
}

// The output half of a denormal-mode attribute ("preserve-sign,preserve-sign").
std::string denormalOutput(const Module &M, StringRef Attribute, StringRef Fallback) {
  for (const Function &F : M)
    if (isUserFunction(F) && F.hasFnAttribute(Attribute))
      return F.getFnAttribute(Attribute).getValueAsString().split(',').first.str();
  return Fallback.str();
}

// What LLVM 22's NVVMReflect answers: __CUDA_FTZ and __CUDA_PREC_SQRT from
// module flags, any name from `-nvvm-reflect-add=NAME=VALUE`, 0 otherwise.
int64_t reflectValue(const Module &M, StringRef Name, const CommandLine &CL) {
  int64_t Value = 0;
  auto Flag = [&](StringRef Key) {
    if (auto *C = mdconst::extract_or_null<ConstantInt>(M.getModuleFlag(Key)))
      Value = C->getSExtValue();
  };
  if (Name == "__CUDA_FTZ")
    Flag("nvvm-reflect-ftz");
  else if (Name == "__CUDA_PREC_SQRT")
    Flag("nvvm-reflect-prec-sqrt");
  for (const json::Value &V : CL.mllvm()) {
    StringRef Opt = *V.getAsString();
    if (!Opt.consume_front("-nvvm-reflect-add="))
      continue;
    for (StringRef Pair : llvm::split(Opt, ',')) {
      auto [Key, Number] = Pair.split('=');
      int64_t Parsed;
      if (Key == Name && !Number.getAsInteger(10, Parsed))
        Value = Parsed;
    }
  }
  return Value;
}

} // namespace

namespace mneme {

json::Object describeCodegen(const Module &M, StringRef OptLevel) {
  CommandLine CL{cc1Arguments()};
  bool FromCC1 = !CL.Args.empty();
  Observed O = observe(M);

  std::string Level = OptLevel.str();
  if (Level.empty() && FromCC1) {
    std::string Flag = CL.last("-O", "0");
    Level = Flag == "fast" || Flag == "4" ? "3" : Flag.empty() || Flag == "g" ? "1" : Flag;
  }

  // clang compiles CUDA with -ffp-contract=fast unless told otherwise.
  std::string Contract;
  if (FromCC1)
    Contract = CL.last("-ffp-contract=", "fast");
  else
    Contract = O.Contract ? "fast" : O.MulAdd ? "on" : O.FPArith ? "off" : "fast";

  bool Optimising = !Level.empty() && Level != "0";
  bool Speed = Level == "2" || Level == "3";
  bool Unroll = FromCC1 ? (CL.has("-funroll-loops") ||
                           (Speed && !CL.has("-fno-unroll-loops")))
                        : Speed;
  auto Either = [&](StringRef Flag, bool InModule) {
    return FromCC1 ? CL.has(Flag) || InModule : InModule;
  };

  // NVPTX's own pipeline-start pass has already folded the module's
  // __nvvm_reflect calls (the captured IR holds the answers); these are the
  // answers it gave.
  json::Object Reflect{{"__CUDA_FTZ", reflectValue(M, "__CUDA_FTZ", CL)},
                       {"__CUDA_PREC_SQRT", reflectValue(M, "__CUDA_PREC_SQRT", CL)}};
  bool Ftz = reflectValue(M, "__CUDA_FTZ", CL) != 0;
  bool Reciprocal = Either("-freciprocal-math", O.Arcp);

  json::Object Codegen{
      {"source", FromCC1 ? "cc1" : "module"},
      {"opt_level", Level.empty() ? json::Value(nullptr) : json::Value(Level)},
      {"fp_contract", Contract},
      {"denormals_f32", denormalOutput(M, "denormal-fp-math-f32",
                                       denormalOutput(M, "denormal-fp-math", "ieee"))},
      {"denormals_f64", denormalOutput(M, "denormal-fp-math", "ieee")},
      {"ftz", Ftz},
      {"prec_div", !Reciprocal},
      {"prec_sqrt", reflectValue(M, "__CUDA_PREC_SQRT", CL) != 0},
      {"approx_func", Either("-fapprox-func", O.Afn)},
      {"approx_transcendentals",
       FromCC1 ? json::Value(CL.has("-fgpu-approx-transcendentals")) : json::Value(nullptr)},
      {"no_infs", Either("-menable-no-infs", O.NoInfs)},
      {"no_nans", Either("-menable-no-nans", O.NoNaNs)},
      {"no_signed_zeros", Either("-fno-signed-zeros", O.NoSignedZeros)},
      {"reassociate", Either("-mreassociate", O.Reassoc)},
      {"reciprocal", Reciprocal},
      {"fast_math", FromCC1 ? CL.has("-ffast-math")
                            : O.Reassoc && O.Arcp && O.Afn && O.NoNaNs && O.NoInfs &&
                                  O.NoSignedZeros},
      {"loop_unrolling", Optimising && Unroll},
      {"loop_vectorization", FromCC1 ? CL.has("-vectorize-loops") : Speed},
      {"slp_vectorization", FromCC1 ? CL.has("-vectorize-slp") : Speed},
      {"reflect", std::move(Reflect)},
      {"mllvm", CL.mllvm()},
  };
  return Codegen;
}

} // namespace mneme
