// SPDX-License-Identifier: Apache-2.0
// Where a Storage's shared record (the shared_ptr control block with the Storage in it) comes
// from: a small per-thread cache of freed records, in front of operator new. Every op output is
// one such record, made and freed once per call. Next to a large ATen conv2d, whose frees of its
// 64 KiB and larger buffers make glibc consolidate the heap around our small block, that pair
// cost about 365 allocator instructions per call over ATen's direct call; from the cache it is
// about 170 (callgrind, docs/benchmarks.md, "Instruction lines and the output's record").
#pragma once

#include <cstddef>

namespace capsule::storage_records {

/// False in a build under AddressSanitizer: there every record goes back to operator delete at
/// once, so a use after free of a Storage is still caught.
bool enabled() noexcept;

/// A block of `bytes` freed earlier on this thread, or null when none of that size is cached.
void* take(std::size_t bytes) noexcept;
/// Keeps `block` (of `bytes`, from operator new) for reuse on this thread; false when the cache
/// is full, holds another size, or this thread is exiting: the caller then deletes it.
bool give(void* block, std::size_t bytes) noexcept;

/// The allocator std::allocate_shared uses for Storage records. Single-object requests go
/// through this thread's cache; anything else, and any record the cache cannot take, uses plain
/// operator new and delete. A record freed on another thread than the one that made it joins
/// that thread's cache: every block comes from the same global operator new.
template <class T>
struct Allocator {
  using value_type = T;
  Allocator() = default;
  template <class U>
  Allocator(const Allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "records use operator new's default alignment");
    if (n == 1) {
      if (void* block = take(sizeof(T))) return static_cast<T*>(block);
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1 && give(p, sizeof(T))) return;
    ::operator delete(p);
  }
  template <class U>
  bool operator==(const Allocator<U>&) const noexcept { return true; }
};

}  // namespace capsule::storage_records
