// SPDX-License-Identifier: Apache-2.0
// The session's two message styles: TorchLean's exact texts (the library default, fixed by the
// reference semantics) and the plain ones `capsule run` uses, which state the same facts without
// TorchLean's `torch:` prefixes and jargon.
#include <doctest/doctest.h>

#include <sstream>

#include "capsule/runtime/message_style.hpp"
#include "capsule/runtime/session.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

RuntimeError open_refusal(const Workspace& workspace, std::string profile, MessageStyle style,
                          std::vector<Op> preselect = {}) {
  SessionOptions options;
  options.profile = std::move(profile);
  options.message_style = style;
  options.preselect = std::move(preselect);
  auto session = Session::open(workspace, testing::reference_handlers(), options);
  REQUIRE_FALSE(session);
  return session.error();
}

}  // namespace

TEST_SUITE("message style") {
  TEST_CASE("restyle drops one leading TorchLean prefix under the plain style only") {
    CHECK(restyle("torch: backend planning failed", MessageStyle::Plain) == "backend planning failed");
    CHECK(restyle("torch eager session: unknown profile `x`", MessageStyle::Plain) == "unknown profile `x`");
    CHECK(restyle("torch: backend planning failed", MessageStyle::TorchLean) == "torch: backend planning failed");
    // Only at the start, and only one: the rest of a message is left as it is.
    CHECK(restyle("profile `torch: x`", MessageStyle::Plain) == "profile `torch: x`");
    CHECK(restyle("torch: torch: x", MessageStyle::Plain) == "torch: x");
    CHECK(restyle("", MessageStyle::Plain).empty());
  }

  TEST_CASE("a CUDA profile's refusal in plain words states the same facts") {
    const RuntimeError torchlean = open_refusal(testing::shipped(), "checked_cuda", MessageStyle::TorchLean);
    const RuntimeError plain = open_refusal(testing::shipped(), "checked_cuda", MessageStyle::Plain);
    CHECK(plain.code == torchlean.code);
    CHECK(torchlean.message ==
          "torch eager session: profile `checked_cuda` targets `cuda`, but this build has only CPU parity stubs for "
          "CUDA (no native CUDA runtime is linked), so there is no usable CUDA device; nothing falls back to the CPU");
    CHECK(plain.message ==
          "profile `checked_cuda` targets `cuda`, but this build has no CUDA runtime linked, so there is no usable "
          "CUDA device; nothing falls back to the CPU");
  }

  TEST_CASE("a device the profile has no capsule for, and an unknown profile, in plain words") {
    const RuntimeError metal = open_refusal(testing::shipped(), "future_metal", MessageStyle::Plain);
    CHECK(metal.code == RuntimeCode::DeviceUnavailable);
    CHECK(metal.message == "backend profile `future_metal` has no capsule for device `metal`");
    const RuntimeError unknown = open_refusal(testing::shipped(), "checked_cpus", MessageStyle::Plain);
    CHECK(unknown.code == RuntimeCode::UnknownProfile);
    CHECK(unknown.message.rfind("unknown profile `checked_cpus`; did you mean `checked_cpu`?", 0) == 0);
  }

  TEST_CASE("a gate refusal at selection loses only the prefix") {
    testing::ScratchTree tree("message-style-gate");
    tree.replace("catalogs/reference.toml", "name = \"reference.relu\"\nop = \"relu\"\n",
                 "name = \"reference.relu\"\nop = \"relu\"\ncontracts.value = { claim = \"value-refinement\", "
                 "evidence = { kind = \"trusted-boundary\", reason = \"demoted for the test\" } }\n");
    const Workspace workspace = tree.load();
    const RuntimeError torchlean = open_refusal(workspace, "checked_cpu", MessageStyle::TorchLean, {Op::Relu});
    const RuntimeError plain = open_refusal(workspace, "checked_cpu", MessageStyle::Plain, {Op::Relu});
    CHECK(plain.code == RuntimeCode::GateRejected);
    REQUIRE(torchlean.message.rfind("torch: ", 0) == 0);
    CHECK(plain.message == torchlean.message.substr(7));
    CHECK(plain.message.rfind("backend planning failed for `relu`: backend profile checked_cpu rejected `relu`: ", 0) ==
          0);
  }

  TEST_CASE("a binding refusal on first use is plain too") {
    SessionOptions options;
    options.profile = "checked_cpu";
    options.message_style = MessageStyle::Plain;
    const HandlerRegistry none;
    auto session = Session::open(testing::shipped(), none, options);
    REQUIRE(session);
    auto selected = session->select(Op::Relu);
    REQUIRE_FALSE(selected);
    CHECK(selected.error().code == RuntimeCode::NoHandler);
    CHECK(selected.error().message.rfind("`relu` selected capsule `reference.relu` (reference/cpu), but no matching "
                                         "executable handler is linked",
                                         0) == 0);
  }

  TEST_CASE("the backend log's header in each style") {
    for (const MessageStyle style : {MessageStyle::TorchLean, MessageStyle::Plain}) {
      std::ostringstream log;
      SessionOptions options;
      options.profile = "checked_cpu";
      options.show_backend = true;
      options.log = &log;
      options.message_style = style;
      REQUIRE(Session::open(testing::shipped(), testing::reference_handlers(), options));
      CHECK(log.str() == backend_log_header(style));
    }
    CHECK(backend_log_header(MessageStyle::TorchLean) == "[TorchLean] backend capsules used:\n");
    CHECK(backend_log_header(MessageStyle::Plain).find("TorchLean") == std::string_view::npos);
  }
}

}  // namespace capsule
