#include "ServeTable.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <tuple>

namespace mneme::recorder {
namespace {

std::vector<std::string> split(const std::string &Line, char Sep) {
  std::vector<std::string> Out;
  std::string Field;
  std::istringstream In(Line);
  while (std::getline(In, Field, Sep))
    Out.push_back(Field);
  if (!Line.empty() && Line.back() == Sep)
    Out.emplace_back();
  return Out;
}

bool number(const std::string &Text, uint64_t &Out) {
  if (Text.empty() || Text.size() > 19 || Text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  Out = std::strtoull(Text.c_str(), nullptr, 10);
  return true;
}

// "X,Y,Z" with every value 1..2^31-1.
bool dims(const std::string &Text, dim3 &Out) {
  std::vector<std::string> Parts = split(Text, ',');
  uint64_t V[3];
  if (Parts.size() != 3)
    return false;
  for (int I = 0; I < 3; ++I)
    if (!number(Parts[I], V[I]) || V[I] == 0 || V[I] > 0x7fffffff)
      return false;
  Out = dim3(unsigned(V[0]), unsigned(V[1]), unsigned(V[2]));
  return true;
}

bool shape(const std::string &G, const std::string &B, const std::string &S, Shape &Out) {
  return dims(G, Out.Grid) && dims(B, Out.Block) && number(S, Out.SharedMem);
}

bool hexBytes(const std::string &Hex, std::string &Out) {
  if (Hex.size() % 2)
    return false;
  Out.clear();
  for (size_t I = 0; I < Hex.size(); I += 2) {
    char *End = nullptr;
    std::string Pair = Hex.substr(I, 2);
    long V = std::strtol(Pair.c_str(), &End, 16);
    if (*End != '\0')
      return false;
    Out.push_back(static_cast<char>(V));
  }
  return true;
}

// "-" or "I:HEX;I:HEX".
bool specialized(const std::string &Text, ServeEntry &E) {
  if (Text == "-")
    return true;
  for (const std::string &Item : split(Text, ';')) {
    size_t Colon = Item.find(':');
    uint64_t Index;
    std::string Bytes;
    if (Colon == std::string::npos || !number(Item.substr(0, Colon), Index) || Index > 4096 ||
        !hexBytes(Item.substr(Colon + 1), Bytes) || Bytes.empty())
      return false;
    E.Specialized.emplace_back(unsigned(Index), Bytes);
  }
  return true;
}

// entry KERNEL ARCH IR|image:IMAGE RGRID RBLOCK RSMEM SGRID SBLOCK SSMEM CUBIN SPECDIMS ARGS
bool entry(const std::vector<std::string> &F, ServeEntry &E) {
  if (F.size() != 13 || F[1].empty() || F[2].empty() || F[11].empty())
    return false;
  constexpr std::string_view ImagePrefix = "image:";
  E.ImageDigest = F[3].compare(0, ImagePrefix.size(), ImagePrefix) == 0;
  E.IRSha256 = E.ImageDigest ? F[3].substr(ImagePrefix.size()) : F[3];
  if (E.IRSha256.size() != 64)
    return false;
  E.Kernel = F[1];
  E.Arch = F[2];
  E.Cubin = F[10];
  E.SpecializeDims = F[11] == "1";
  return shape(F[4], F[5], F[6], E.Recorded) && shape(F[7], F[8], F[9], E.Serve) &&
         (F[11] == "0" || F[11] == "1") && specialized(F[12], E);
}

uint64_t count(const dim3 &D) { return uint64_t(D.x) * D.y * D.z; }

// How far a recorded shape is from a launch: block threads first, then blocks.
std::pair<double, double> distance(const Shape &Recorded, const Shape &Launch) {
  return {std::fabs(std::log(double(count(Recorded.Block)) / double(count(Launch.Block)))),
          std::fabs(std::log(double(count(Recorded.Grid)) / double(count(Launch.Grid))))};
}

} // namespace

bool operator<(const Shape &A, const Shape &B) {
  return std::tie(A.Grid.x, A.Grid.y, A.Grid.z, A.Block.x, A.Block.y, A.Block.z, A.SharedMem) <
         std::tie(B.Grid.x, B.Grid.y, B.Grid.z, B.Block.x, B.Block.y, B.Block.z, B.SharedMem);
}

bool operator==(const Shape &A, const Shape &B) { return !(A < B) && !(B < A); }

bool ServeTable::load(const std::string &Path, std::string &Error) {
  std::ifstream In(Path);
  std::string Line;
  if (!In || !std::getline(In, Line) || Line != "mneme-serve\t1") {
    Error = Path + ": not a version 1 serving table";
    return false;
  }
  for (unsigned N = 2; std::getline(In, Line); ++N) {
    std::vector<std::string> F = split(Line, '\t');
    bool Ok = !F.empty();
    if (Ok && F[0] == "nearest" && F.size() == 2)
      Nearest = F[1] == "1";
    else if (Ok && F[0] == "time-all" && F.size() == 2)
      TimeAll = F[1] == "1";
    else if (Ok && F[0] == "report" && F.size() == 2)
      Report = F[1];
    else if (Ok && F[0] == "entry") {
      Entries.emplace_back();
      Ok = entry(F, Entries.back());
    } else
      Ok = false;
    if (!Ok) {
      Error = Path + ":" + std::to_string(N) + ": malformed line";
      return false;
    }
  }
  for (const ServeEntry &E : Entries) // complete here, so its addresses hold
    Kernels[E.Kernel].Entries.push_back(&E);
  return true;
}

ServeDecision ServeTable::decide(const std::vector<const ServeEntry *> &Candidates,
                                 const Shape &Launch) const {
  ServeDecision D;
  for (const ServeEntry *E : Candidates)
    if (E->Recorded == Launch) {
      D.Entry = E;
      D.Launch = E->Serve;
      return D;
    }
  if (!Nearest || Candidates.empty()) {
    D.Reason = "no entry for this launch shape (--match nearest serves the closest)";
    return D;
  }
  const ServeEntry *Best = Candidates.front();
  for (const ServeEntry *E : Candidates)
    if (distance(E->Recorded, Launch) < distance(Best->Recorded, Launch))
      Best = E;
  const Shape &R = Best->Recorded, &S = Best->Serve;
  if (Best->SpecializeDims) {
    D.Reason = "the nearest entry is specialised on its own launch shape";
    return D;
  }
  D.Launch = Launch;
  // Tuned geometry carries over when it kept the recorded threads per
  // dimension and its block divides this launch's threads.
  if (!(S.Block.x == R.Block.x && S.Block.y == R.Block.y && S.Block.z == R.Block.z)) {
    unsigned LG[3] = {Launch.Grid.x, Launch.Grid.y, Launch.Grid.z};
    unsigned LB[3] = {Launch.Block.x, Launch.Block.y, Launch.Block.z};
    unsigned RG[3] = {R.Grid.x, R.Grid.y, R.Grid.z}, RB[3] = {R.Block.x, R.Block.y, R.Block.z};
    unsigned SG[3] = {S.Grid.x, S.Grid.y, S.Grid.z}, SB[3] = {S.Block.x, S.Block.y, S.Block.z};
    // CUDA's limits on a grid's sides.
    const uint64_t MostBlocks[3] = {0x7fffffff, 65535, 65535};
    unsigned G[3];
    for (int I = 0; I < 3; ++I) {
      uint64_t Threads = uint64_t(LG[I]) * LB[I];
      if (uint64_t(SG[I]) * SB[I] != uint64_t(RG[I]) * RB[I] || Threads % SB[I] ||
          Threads / SB[I] > MostBlocks[I]) {
        D.Reason = "the tuned geometry does not carry over to this launch shape";
        return D;
      }
      G[I] = unsigned(Threads / SB[I]);
    }
    D.Launch.Grid = dim3(G[0], G[1], G[2]);
    D.Launch.Block = S.Block;
  }
  if (S.SharedMem != R.SharedMem) {
    if (Launch.SharedMem != R.SharedMem) {
      D.Reason = "the tuned shared memory does not carry over to this launch shape";
      return D;
    }
    D.Launch.SharedMem = S.SharedMem;
  }
  D.Entry = Best;
  return D;
}

} // namespace mneme::recorder
