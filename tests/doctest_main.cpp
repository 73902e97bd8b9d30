// SPDX-License-Identifier: Apache-2.0
// capsule_tests' and capsule_libtorch_tests' main: the shared runner (runner.hpp) with the
// CLI's fingerprint and the reference handlers' fault injection (--tamper-op).
#include "linked_handlers.hpp"
#include "runner.hpp"
#include "test_support.hpp"

int main(int argc, char** argv) {
  capsule::testing::TestBinary binary;
  binary.name = "capsule_tests";
  // The CLI's fingerprint: the build's, and the linked providers' (LibTorch's BLAS and threads).
  binary.fingerprint = [] { return capsule::cli::linked_fingerprint(); };
  binary.tamper = [](std::string_view op) { return capsule::testing::tamper_reference_op(op); };
  return capsule::testing::run_test_binary(argc, argv, binary);
}
