#include "Registry.h"

#include "CudaApi.h"

#include "Options.h"
#include "mneme/EmbeddedIR.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

namespace mneme::recorder {
namespace {

// The wrapper the compiler passes to __cudaRegisterFatBinary, and the
// header of the fatbinary it points to (both fixed by NVIDIA's toolchain).
struct FatBinaryWrapper {
  int Magic;
  int Version;
  const unsigned char *Data;
  void *Unused;
};
constexpr int WrapperMagic = 0x466243b1;
constexpr uint32_t FatBinaryMagic = 0xBA55ED50;

// The extent of the top-level JSON array under Key, skipping strings.
std::string_view arrayUnder(std::string_view Json, std::string_view Key) {
  std::string Needle = "\"" + std::string(Key) + "\":[";
  size_t Start = Json.find(Needle);
  if (Start == std::string_view::npos)
    return {};
  Start += Needle.size() - 1;
  int Depth = 0;
  bool InString = false;
  for (size_t I = Start; I < Json.size(); ++I) {
    char C = Json[I];
    if (InString) {
      if (C == '\\')
        ++I;
      else if (C == '"')
        InString = false;
    } else if (C == '"') {
      InString = true;
    } else if (C == '[' || C == '{') {
      ++Depth;
    } else if ((C == ']' || C == '}') && --Depth == 0) {
      return Json.substr(Start, I + 1 - Start);
    }
  }
  return {};
}

// The value of a member of the top-level object, as text (a string's
// without its quotes: these fields hold no escapes), or empty.  Only the
// top level counts, so a key or value nested deeper or inside a string
// (a kernel's name, a source path) is never taken for the field.
std::string_view topLevelField(std::string_view Json, std::string_view Key) {
  constexpr std::string_view Space = " \t\r\n";
  int Depth = 0;
  for (size_t I = 0; I < Json.size(); ++I) {
    char C = Json[I];
    if (C == '{' || C == '[') {
      ++Depth;
    } else if (C == '}' || C == ']') {
      --Depth;
    } else if (C == '"') {
      size_t End = I + 1;
      while (End < Json.size() && Json[End] != '"')
        End += Json[End] == '\\' ? 2 : 1;
      if (End >= Json.size())
        return {};
      std::string_view Text = Json.substr(I + 1, End - I - 1);
      I = End;
      size_t Colon = Json.find_first_not_of(Space, End + 1);
      if (Depth != 1 || Colon == std::string_view::npos || Json[Colon] != ':' || Text != Key)
        continue;  // a value, or a key of another member
      size_t Value = Json.find_first_not_of(Space, Colon + 1);
      if (Value == std::string_view::npos)
        return {};
      if (Json[Value] == '"') {
        size_t Close = Json.find('"', Value + 1);
        return Close == std::string_view::npos ? std::string_view{}
                                               : Json.substr(Value + 1, Close - Value - 1);
      }
      size_t Stop = Json.find_first_of(",}] \t\r\n", Value);
      return Json.substr(Value, Stop == std::string_view::npos ? Stop : Stop - Value);
    }
  }
  return {};
}

} // namespace

bool IRModule::defines(const std::string &Kernel) const {
  // Mangled names need no JSON escaping, so the exact field text is safe.
  return arrayUnder(Metadata, "kernels").find("\"name\":\"" + Kernel + "\"") !=
         std::string_view::npos;
}

void Registry::addFatBinary(void **Handle, const void *Wrapper) {
  std::lock_guard<std::mutex> G(Lock);
  const auto *W = static_cast<const FatBinaryWrapper *>(Wrapper);
  std::string_view Image;
  if (W && W->Magic == WrapperMagic && W->Data) {
    uint32_t Magic;
    uint16_t HeaderSize;
    uint64_t FatSize;
    std::memcpy(&Magic, W->Data, 4);
    std::memcpy(&HeaderSize, W->Data + 6, 2);
    std::memcpy(&FatSize, W->Data + 8, 8);
    if (Magic == FatBinaryMagic)
      Image = std::string_view(reinterpret_cast<const char *>(W->Data), HeaderSize + FatSize);
  }
  Images[Handle] = Image;
  ++Registrations;
}

void Registry::addFunction(void **Handle, const void *HostFunction, const char *DeviceName) {
  std::lock_guard<std::mutex> G(Lock);
  Kernels[HostFunction] = KernelSymbol{DeviceName, Handle, HostFunction};
}

void Registry::addVariable(void **Handle, const void *HostVariable, const char *DeviceName,
                           uint64_t Size, bool Constant) {
  std::lock_guard<std::mutex> G(Lock);
  Variables.push_back(VariableSymbol{DeviceName, Handle, HostVariable, Size, Constant});
  ++Registrations;
}

void Registry::addIR(const void *Data, uint64_t Size) {
  std::vector<embedded_ir::RecordView> Records;
  std::string Error;
  if (!embedded_ir::decodeRecords(Data, Size, Records, Error)) {
    report("ignoring malformed embedded IR: " + Error);
    return;
  }
  std::lock_guard<std::mutex> G(Lock);
  for (const auto &R : Records) {
    IRModule M{std::string(R.Metadata), std::string(R.Bitcode), ""};
    M.Arch = std::string(topLevelField(M.Metadata, "arch"));
    M.Linked = topLevelField(M.Metadata, "linked") == "true";
    IR.push_back(std::move(M));
  }
}

void Registry::addKernelHandle(const void *Handle, const void *HostFunction) {
  std::lock_guard<std::mutex> G(Lock);
  Handles[Handle] = HostFunction;
}

const void *Registry::hostFunctionOf(const void *Handle) const {
  std::lock_guard<std::mutex> G(Lock);
  auto It = Handles.find(Handle);
  return It == Handles.end() ? nullptr : It->second;
}

const KernelSymbol *Registry::kernel(const void *HostFunction) const {
  std::lock_guard<std::mutex> G(Lock);
  auto It = Kernels.find(HostFunction);
  return It == Kernels.end() ? nullptr : &It->second;
}

std::vector<VariableSymbol> Registry::variables(void **Module) const {
  std::lock_guard<std::mutex> G(Lock);
  std::vector<VariableSymbol> Out;
  for (const VariableSymbol &V : Variables)
    if (V.Module == Module)
      Out.push_back(V);
  return Out;
}

const IRModule *Registry::irFor(const std::string &Kernel, const std::string &Arch) const {
  std::lock_guard<std::mutex> G(Lock);
  // The arch first; then a module linked from relocatable device code over
  // the kernel's own TU, whose calls into other TUs are only declarations.
  const IRModule *Best = nullptr;
  int BestScore = -1;
  for (const IRModule &M : IR) {
    if (!M.defines(Kernel))
      continue;
    int Score = (M.Arch == Arch ? 2 : 0) + (M.Linked ? 1 : 0);
    if (Score > BestScore) {
      Best = &M;
      BestScore = Score;
    }
  }
  return Best;
}

std::string_view Registry::image(void **Module) const {
  std::lock_guard<std::mutex> G(Lock);
  auto It = Images.find(Module);
  return It == Images.end() ? std::string_view() : It->second;
}

size_t Registry::irModuleCount() const {
  std::lock_guard<std::mutex> G(Lock);
  return IR.size();
}

Registry &registry() {
  // Never destroyed: registration and launches may run during exit.
  static Registry *R = new Registry;
  return *R;
}

namespace {

// The size of an image handed to the driver: a fatbinary's from its
// header, a cubin's from its ELF headers, PTX's up to its terminating NUL.
size_t imageSize(const void *Image) {
  const auto *P = static_cast<const unsigned char *>(Image);
  uint32_t Magic;
  std::memcpy(&Magic, P, 4);
  if (Magic == FatBinaryMagic) {
    uint16_t HeaderSize;
    uint64_t Size;
    std::memcpy(&HeaderSize, P + 6, 2);
    std::memcpy(&Size, P + 8, 8);
    return HeaderSize + Size;
  }
  if (std::memcmp(P, "\x7f" "ELF", 4) == 0 && P[4] == 2) {
    uint64_t SectionHeaders, ProgramHeaders;
    uint16_t ProgramEntry, ProgramCount, SectionEntry, SectionCount;
    std::memcpy(&ProgramHeaders, P + 0x20, 8);
    std::memcpy(&SectionHeaders, P + 0x28, 8);
    std::memcpy(&ProgramEntry, P + 0x36, 2);
    std::memcpy(&ProgramCount, P + 0x38, 2);
    std::memcpy(&SectionEntry, P + 0x3A, 2);
    std::memcpy(&SectionCount, P + 0x3C, 2);
    uint64_t End = std::max<uint64_t>(SectionHeaders + uint64_t(SectionEntry) * SectionCount,
                                      ProgramHeaders + uint64_t(ProgramEntry) * ProgramCount);
    // Section contents lie before the section headers in every cubin
    // NVIDIA's tools write; the end of the last one bounds the file too.
    for (uint16_t I = 0; I < SectionCount; ++I) {
      const unsigned char *H = P + SectionHeaders + uint64_t(I) * SectionEntry;
      uint32_t Type;
      uint64_t Offset, Size;
      std::memcpy(&Type, H + 4, 4);
      std::memcpy(&Offset, H + 0x18, 8);
      std::memcpy(&Size, H + 0x20, 8);
      if (Type != 8) // SHT_NOBITS has no contents
        End = std::max(End, Offset + Size);
    }
    return End;
  }
  return std::strlen(static_cast<const char *>(Image)) + 1;
}

// A fatbinary may come inside the wrapper the compiler emits.
const void *unwrap(const void *Image) {
  int Magic;
  std::memcpy(&Magic, Image, sizeof Magic);
  return Magic == WrapperMagic ? static_cast<const FatBinaryWrapper *>(Image)->Data : Image;
}

} // namespace

void Registry::addImage(const void *Handle, const void *Image) {
  if (!Handle || !Image)
    return;
  Image = unwrap(Image);
  keepImage(Handle, std::string(static_cast<const char *>(Image), imageSize(Image)));
}

void Registry::keepImage(const void *Handle, std::string Copy) {
  std::lock_guard<std::mutex> G(Lock);
  DriverImages[Handle] = ImageCopies.emplace_back(std::move(Copy));
}

void Registry::addImageFile(const void *Handle, const char *Path, bool Library) {
  if (!Handle || !Path)
    return;
  // What the driver just read from the file (a PTX text, a cubin or a fatbinary).
  std::ifstream In(Path, std::ios::binary);
  std::string Image((std::istreambuf_iterator<char>(In)), std::istreambuf_iterator<char>());
  if (Image.empty())
    return;
  if (Image.find('\0') == std::string::npos)
    Image.push_back('\0'); // PTX, as a module image in memory is: a C string
  keepImage(Handle, std::move(Image));
  if (Library) {
    std::lock_guard<std::mutex> G(Lock);
    Libraries.insert(Handle);
  }
}

void Registry::addModuleImage(CUmodule Module, const void *Image) { addImage(Module, Image); }

void Registry::addLibraryImage(CUlibrary Library, const void *Image) {
  addImage(Library, Image);
  std::lock_guard<std::mutex> G(Lock);
  Libraries.insert(Library);
}

void Registry::addLibraryKernel(CUkernel Kernel, CUlibrary Library, const char *Name) {
  if (!Kernel || !Name)
    return;
  std::lock_guard<std::mutex> G(Lock);
  LibraryKernels[Kernel] = {Library, Name};
}

LaunchedKernel Registry::launched(const void *Function, bool DriverApi) const {
  if (DriverApi)
    return driverKernel(reinterpret_cast<CUfunction>(const_cast<void *>(Function)));
  LaunchedKernel L;
  if (const KernelSymbol *S = kernel(Function)) {
    L.Name = S->Name;
    L.Module = S->Module;
    L.Image = image(S->Module);
  }
  return L;
}

const void *Registry::owner(const void *Handle) const {
  if (DriverImages.count(Handle))
    return Handle;
  if (auto Known = Owners.find(Handle); Known != Owners.end())
    return Known->second;
  // A library's module (cuLibraryGetModule, or the module of a function
  // from cuKernelGetFunction): the library it belongs to, asked once.
  const Driver &Cu = driver();
  const void *Found = Handle;
  for (const void *Library : Libraries) {
    CUmodule Of = nullptr;
    if (Cu.Loaded &&
        Cu.LibraryGetModule(&Of, static_cast<CUlibrary>(const_cast<void *>(Library))) ==
            CUDA_SUCCESS && Of == Handle) {
      Found = Library;
      break;
    }
  }
  if (Found != Handle)
    Owners[Handle] = Found;
  return Found;
}

LaunchedKernel Registry::driverKernel(CUfunction Function) const {
  LaunchedKernel D;
  const Driver &Cu = driver();
  std::lock_guard<std::mutex> G(Lock);
  if (auto K = LibraryKernels.find(Function); K != LibraryKernels.end()) {
    auto Image = DriverImages.find(K->second.first);
    if (Image == DriverImages.end())
      return D;
    CUfunction F = nullptr;
    if (Cu.KernelGetFunction(&F, reinterpret_cast<CUkernel>(Function)) != CUDA_SUCCESS)
      return D;
    D.Name = K->second.second;
    D.Image = Image->second;
    D.Function = F;
    D.DriverHandle = K->second.first;
    return D;
  }
  CUmodule Module = nullptr;
  const char *Name = nullptr;
  if (Cu.FuncGetModule(&Module, Function) != CUDA_SUCCESS ||
      Cu.FuncGetName(&Name, Function) != CUDA_SUCCESS || !Name)
    return D;
  const void *Handle = owner(Module);
  D.DriverHandle = Handle; // known or not: forgotten when it is unloaded
  auto Image = DriverImages.find(Handle);
  if (Image == DriverImages.end())
    return D;
  D.Name = Name;
  D.Image = Image->second;
  D.Function = Function;
  return D;
}

void Registry::forgetDriverHandle(const void *Handle) {
  std::lock_guard<std::mutex> G(Lock);
  DriverImages.erase(Handle);
  DriverGlobals.erase(Handle);
  Libraries.erase(Handle);
  for (auto It = Owners.begin(); It != Owners.end();)
    It = It->first == Handle || It->second == Handle ? Owners.erase(It) : std::next(It);
  for (auto It = LibraryKernels.begin(); It != LibraryKernels.end();)
    It = It->second.first == Handle ? LibraryKernels.erase(It) : std::next(It);
}

void Registry::addDriverGlobal(const void *Handle, const char *Name, uint64_t Address,
                               uint64_t Size) {
  if (!Handle || !Name || !Address)
    return;
  VariableSymbol V;
  V.Name = Name;
  V.Size = Size;
  V.Address = Address;
  driver(); // loaded before the lock: owner() may ask it
  std::lock_guard<std::mutex> G(Lock);
  DriverGlobals[owner(Handle)][Name] = V;
}

std::vector<VariableSymbol> Registry::driverGlobals(const void *Handle) const {
  std::lock_guard<std::mutex> G(Lock);
  std::vector<VariableSymbol> Out;
  if (auto It = DriverGlobals.find(Handle); It != DriverGlobals.end())
    for (const auto &[Name, V] : It->second)
      Out.push_back(V);
  return Out;
}

} // namespace mneme::recorder
