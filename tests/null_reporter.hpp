// SPDX-License-Identifier: Apache-2.0
// A doctest reporter that ignores every event. doctest's IReporter declares each event pure
// virtual; the project's listeners (coverage, ledger, filter match) derive from this and override
// only the events they follow.
#pragma once

#include <doctest/doctest.h>

namespace capsule::testing {

class NullReporter : public doctest::IReporter {
 public:
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace capsule::testing
