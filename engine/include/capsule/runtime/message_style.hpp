// SPDX-License-Identifier: Apache-2.0
// How the eager session words its refusals and its backend log: TorchLean's exact texts (the
// reference semantics fix them, and the runtime tests compare them byte for byte), or plain ones
// for people at a command line (`capsule run`), without TorchLean's `torch:` context prefixes and
// implementation jargon. The facts a message states are the same in both styles.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace capsule {

enum class MessageStyle : std::uint8_t {
  TorchLean,  ///< TorchLean's texts, exactly (the library default)
  Plain,      ///< the same facts without TorchLean's prefixes and jargon
};

/// The prefix TorchLean puts before a planning, selection or binding refusal of an eager op.
inline constexpr std::string_view kTorchLeanBackendPrefix = "torch: ";
/// The prefix TorchLean puts before a refusal to open an eager session.
inline constexpr std::string_view kTorchLeanSessionPrefix = "torch eager session: ";

/// `message`, a refusal the runtime composed, worded in `style`: under Plain without the
/// TorchLean prefix it starts with (one of the two above; the runtime composes them, so no input
/// text can stand at the start of a message). Unchanged under TorchLean.
std::string restyle(std::string message, MessageStyle style);

/// The line a session with show_backend prints at open, before the report rows of each selection.
std::string_view backend_log_header(MessageStyle style);

}  // namespace capsule
