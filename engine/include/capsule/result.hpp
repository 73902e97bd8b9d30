// SPDX-License-Identifier: Apache-2.0
// Result<T, E>: a value or an error, spelled like std::expected so a later switch is mechanical.
// std::expected needs C++23 and libstdc++ 12 lacks its monadic members, so we carry our own.
#pragma once

#include <cassert>
#include <utility>
#include <variant>

namespace capsule {

/// Wraps an error so `Result` construction is unambiguous even when T and E convert.
template <class E>
struct Failure {
  E error;
};

template <class E>
Failure<std::decay_t<E>> fail(E&& error) {
  return Failure<std::decay_t<E>>{std::forward<E>(error)};
}

template <class T, class E>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  template <class F>
  Result(Failure<F> failure) : state_(std::in_place_index<1>, E(std::move(failure.error))) {}  // NOLINT

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & { assert(has_value()); return std::get<0>(state_); }
  const T& value() const& { assert(has_value()); return std::get<0>(state_); }
  T&& value() && { assert(has_value()); return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  E& error() & { assert(!has_value()); return std::get<1>(state_); }
  const E& error() const& { assert(!has_value()); return std::get<1>(state_); }
  E&& error() && { assert(!has_value()); return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, E> state_;
};

}  // namespace capsule
