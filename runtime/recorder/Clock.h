// Seconds on a monotonic clock, for the --verbose report of where
// recording time goes.
#ifndef MNEME_RECORDER_CLOCK_H
#define MNEME_RECORDER_CLOCK_H

#include <chrono>

namespace mneme::recorder {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace mneme::recorder

#endif
