// SPDX-License-Identifier: Apache-2.0
#include "storage_records.hpp"

#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define CAPSULE_RECORD_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CAPSULE_RECORD_CACHE 0
#endif
#endif
#ifndef CAPSULE_RECORD_CACHE
#define CAPSULE_RECORD_CACHE 1
#endif

namespace capsule::storage_records {
namespace {

/// What one thread keeps at most: 32 records of about 150 bytes. A burst of frees beyond that
/// (a tape cleared at once) goes back to operator delete, so an idle thread holds under 5 KiB.
constexpr std::size_t kCapacity = 32;

/// Trivially destructible and constant-initialised, so reading it costs no guard and it stays
/// readable while the thread's other thread_local objects are destroyed (a record freed then
/// finds `closed` and goes to operator delete).
struct Cache {
  void* blocks[kCapacity];
  std::size_t count;
  std::size_t block_bytes;  ///< 0 until the first block is kept
  bool flush_registered;
  bool closed;
};
constinit thread_local Cache cache{};

/// Frees the thread's cached blocks when the thread exits. Registered on the first `give`, so a
/// thread that never frees a record pays nothing.
struct Flush {
  ~Flush() {
    cache.closed = true;
    for (std::size_t i = 0; i < cache.count; ++i) ::operator delete(cache.blocks[i]);
    cache.count = 0;
  }
};

void register_flush() {
  thread_local Flush flush;
  (void)flush;
  cache.flush_registered = true;
}

}  // namespace

bool enabled() noexcept { return CAPSULE_RECORD_CACHE != 0; }

void* take(std::size_t bytes) noexcept {
  if (!CAPSULE_RECORD_CACHE || cache.count == 0 || cache.block_bytes != bytes) return nullptr;
  return cache.blocks[--cache.count];
}

bool give(void* block, std::size_t bytes) noexcept {
  if (!CAPSULE_RECORD_CACHE || cache.closed || cache.count == kCapacity) return false;
  if (cache.block_bytes != bytes) {
    if (cache.block_bytes != 0) return false;
    cache.block_bytes = bytes;
  }
  if (!cache.flush_registered) register_flush();
  cache.blocks[cache.count++] = block;
  return true;
}

}  // namespace capsule::storage_records
