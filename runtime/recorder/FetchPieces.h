// How staged copies become the writer's fetches. A copy larger than the
// limit is split, so that its pieces spread over the fetch threads; small
// copies are grouped up to the limit, so that an instance of a few small
// copies is one fetch on one thread: each fetch thread sets up its own
// stream and pinned buffers (about 1 ms of the driver's time), which a
// small instance recorded just before the application exits would
// otherwise make the exit wait for, once per copy.
#ifndef MNEME_RECORDER_FETCH_PIECES_H
#define MNEME_RECORDER_FETCH_PIECES_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mneme::recorder {

// Bytes [At, At + Bytes) of staged copy number Copy.
struct FetchSpan {
  size_t Copy;
  uint64_t At, Bytes;
};

// The fetches for copies of these sizes, in order: each at most Limit bytes
// (none for a Limit of 0).
std::vector<std::vector<FetchSpan>> fetchPieces(const std::vector<uint64_t> &CopyBytes,
                                                uint64_t Limit);

} // namespace mneme::recorder

#endif
