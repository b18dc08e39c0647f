// Pass registration: `opt -passes=mneme-capture|mneme-embed`, and the
// pipeline-start extension point through which clang runs them unasked.
#include "MnemePasses.h"
#include "Version.h"

#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Plugins/PassPlugin.h"
#include "llvm/TargetParser/Triple.h"

using namespace llvm;

namespace {

struct CapturePass : PassInfoMixin<CapturePass> {
  std::string OptLevel; // the pipeline's level; empty when run by name
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    bool Changed = mneme::resolveRenamedStatics(M);
    mneme::captureDeviceModule(M, OptLevel);
    return Changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
  static bool isRequired() { return true; } // also at -O0 and under opt-bisect
};

struct EmbedPass : PassInfoMixin<EmbedPass> {
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    mneme::embedHostModule(M);
    return PreservedAnalyses::none();
  }
  static bool isRequired() { return true; }
};

std::string levelName(OptimizationLevel Level) {
  if (Level.getSizeLevel() == 1)
    return "s";
  if (Level.getSizeLevel() == 2)
    return "z";
  return std::to_string(Level.getSpeedupLevel());
}

// Clang runs the pipeline-start callbacks before any optimisation, at every
// level: exactly where the device module must be captured.
void addForTarget(ModulePassManager &MPM, OptimizationLevel Level) {
  // The triple is only known once the pass runs; dispatch there.
  struct Dispatch : PassInfoMixin<Dispatch> {
    std::string OptLevel;
    PreservedAnalyses run(Module &M, ModuleAnalysisManager &AM) {
      if (M.getTargetTriple().isNVPTX())
        return CapturePass{{}, OptLevel}.run(M, AM);
      // Every host job of a CUDA compile looks for its records: a TU of
      // relocatable device code with only __device__ functions has nothing
      // on the host side that marks it as CUDA.
      return EmbedPass().run(M, AM);
    }
    static bool isRequired() { return true; }
  };
  MPM.addPass(Dispatch{{}, levelName(Level)});
}

bool parsePipelineElement(StringRef Name, ModulePassManager &MPM,
                          ArrayRef<PassBuilder::PipelineElement>) {
  if (Name == "mneme-capture") {
    MPM.addPass(CapturePass());
    return true;
  }
  if (Name == "mneme-embed") {
    MPM.addPass(EmbedPass());
    return true;
  }
  return false;
}

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "MnemePasses", MNEME_VERSION,
          [](PassBuilder &PB) {
            PB.registerPipelineStartEPCallback(addForTarget);
            PB.registerPipelineParsingCallback(parsePipelineElement);
          }};
}
