// A non-owning reference to a callable returning R: how the interposed entry
// points hand the application's own call to the recorder.  Unlike
// std::function it never allocates, which matters on every kernel launch.
// The callable must outlive the reference (a named local or a parameter).
#ifndef MNEME_RECORDER_CALL_REF_H
#define MNEME_RECORDER_CALL_REF_H

#include <type_traits>

namespace mneme::recorder {

template <class R> class CallRef {
public:
  CallRef() : Object(nullptr), Call([](void *) -> R { return R(); }) {}
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, CallRef>>>
  CallRef(F &&Fn) // NOLINT: implicit on purpose
      : Object(const_cast<void *>(static_cast<const void *>(&Fn))),
        Call([](void *O) -> R { return (*static_cast<std::remove_reference_t<F> *>(O))(); }) {}
  R operator()() const { return Call(Object); }

private:
  void *Object;
  R (*Call)(void *);
};

} // namespace mneme::recorder

#endif
