// SPDX-License-Identifier: Apache-2.0
// doctest's runner, plus two modes for the evidence manifest (suite_coverage.hpp):
//   --evidence-manifest  prints the manifest of every suite and the cases it declares
//   --verify-coverage    runs every declaring suite and fails when a declaration does not match
//                        what the suite's test cases ran
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/text.hpp"
#include "suite_coverage.hpp"

namespace {

int print_manifest() {
  std::vector<const char*> args{"capsule_tests", "--list-test-suites", "--reporters=capsule-manifest"};
  doctest::Context context(static_cast<int>(args.size()), args.data());
  const int status = context.run();
  if (status != 0) return status;
  const std::vector<std::string>& suites = capsule::testing::listed_suites();
  if (suites.empty()) {
    std::cerr << "capsule_tests --evidence-manifest: doctest listed no test suites\n";
    return 1;
  }
  std::cout << capsule::write_evidence_manifest(capsule::testing::declared_manifest(suites));
  return std::cout.good() ? 0 : 1;
}

int verify_coverage(std::vector<const char*> args) {
  const std::string filter = "--test-suite=" + capsule::join(capsule::testing::declaring_suites(), ",");
  args.push_back(filter.c_str());
  doctest::Context context(static_cast<int>(args.size()), args.data());
  const int status = context.run();
  if (context.shouldExit()) return status;
  const std::vector<std::string> mismatches = capsule::testing::coverage_mismatches();
  for (const std::string& line : mismatches) std::cerr << "coverage: " << line << "\n";
  if (!mismatches.empty()) {
    std::cerr << "coverage: " << mismatches.size()
              << " declarations do not match what the suites ran; fix the SuiteCoverage declaration next to the "
                 "suite\n";
    return 1;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<const char*> args(argv, argv + argc);
  bool manifest = false;
  bool verify = false;
  std::erase_if(args, [&](const char* arg) {
    const std::string_view text(arg);
    if (text == "--evidence-manifest") return manifest = true;
    if (text == "--verify-coverage") return verify = true;
    return false;
  });
  if (manifest) return print_manifest();
  if (verify) return verify_coverage(std::move(args));
  doctest::Context context(static_cast<int>(args.size()), args.data());
  return context.run();
}
