// SPDX-License-Identifier: Apache-2.0
// The per-thread cache of Storage records (engine/src/runtime/storage_records.hpp): what it keeps
// and hands back, and that tensors made, shared and freed across threads keep their values.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "capsule/runtime/tensor.hpp"
#include "storage_records.hpp"

namespace capsule {
namespace {

// Each case runs on a fresh thread, whose cache starts empty whatever the test thread did.
template <class Body>
void on_new_thread(Body body) {
  std::thread thread(body);
  thread.join();
}

TEST_CASE("storage records: a freed block comes back for the same size only, up to the capacity") {
  on_new_thread([] {
    constexpr std::size_t kBytes = 160;
    if (!storage_records::enabled()) {
      // AddressSanitizer builds keep nothing, so a use after free is still reported.
      void* block = ::operator new(kBytes);
      CHECK_FALSE(storage_records::give(block, kBytes));
      ::operator delete(block);
      CHECK(storage_records::take(kBytes) == nullptr);
      return;
    }
    CHECK(storage_records::take(kBytes) == nullptr);
    void* first = ::operator new(kBytes);
    REQUIRE(storage_records::give(first, kBytes));
    CHECK(storage_records::take(kBytes + 16) == nullptr);  // another size is never handed out
    CHECK(storage_records::take(kBytes) == first);
    CHECK(storage_records::take(kBytes) == nullptr);
    // Another size is refused once the cache holds one size; the caller deletes it.
    REQUIRE(storage_records::give(first, kBytes));
    void* other = ::operator new(kBytes + 16);
    CHECK_FALSE(storage_records::give(other, kBytes + 16));
    ::operator delete(other);
    // The capacity bounds what a thread keeps; the blocks still cached are freed at thread exit.
    std::size_t kept = 1;
    std::vector<void*> refused;
    for (int i = 0; i < 100; ++i) {
      void* block = ::operator new(kBytes);
      if (storage_records::give(block, kBytes)) {
        ++kept;
      } else {
        refused.push_back(block);
      }
    }
    CHECK(kept == 32);
    CHECK(refused.size() == 100 - 31);
    for (void* block : refused) ::operator delete(block);
  });
}

TEST_CASE("storage records: a record reused for a new tensor starts fresh") {
  on_new_thread([] {
    std::vector<double> seen;
    for (int round = 0; round < 4; ++round) {
      // Inline (<= 64 bytes) and heap storage both take records; each round frees the last.
      auto small = Tensor::full(*Shape::make({3}), DType::F64, round);
      auto large = Tensor::full(*Shape::make({64}), DType::F32, -round);
      REQUIRE(small);
      REQUIRE(large);
      CHECK(small->foreign_view() == nullptr);  // a reused record carries no earlier view
      CHECK(small->at(2) == round);
      CHECK(large->at(63) == -round);
      CHECK_FALSE(small->shares_storage_with(*large));
    }
  });
}

TEST_CASE("storage records: tensors freed on another thread than the one that made them keep their values") {
  std::vector<Tensor> made;
  on_new_thread([&made] {
    for (int i = 0; i < 40; ++i) made.push_back(*Tensor::full(*Shape::make({2, 2}), DType::F32, i));
  });
  // The maker has exited (its cache was flushed); its tensors live on, and are freed here.
  for (int i = 0; i < 40; ++i) CHECK(made[static_cast<std::size_t>(i)].at(3) == i);
  std::vector<Tensor> copies = made;
  on_new_thread([moved = std::move(made)]() mutable { moved.clear(); });  // frees nothing: copies share
  for (int i = 0; i < 40; ++i) CHECK(copies[static_cast<std::size_t>(i)].at(0) == i);
  on_new_thread([moved = std::move(copies)]() mutable { moved.clear(); });  // the last references
}

}  // namespace
}  // namespace capsule
