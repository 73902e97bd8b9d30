// SPDX-License-Identifier: Apache-2.0
#include "capsule/runtime/message_style.hpp"

namespace capsule {

std::string restyle(std::string message, MessageStyle style) {
  if (style == MessageStyle::TorchLean) return message;
  for (const std::string_view prefix : {kTorchLeanSessionPrefix, kTorchLeanBackendPrefix}) {
    if (std::string_view(message).starts_with(prefix)) {
      message.erase(0, prefix.size());
      break;
    }
  }
  return message;
}

std::string_view backend_log_header(MessageStyle style) {
  return style == MessageStyle::TorchLean ? "[TorchLean] backend capsules used:\n"
                                          : "capsules bound, in the order the session selects them:\n";
}

}  // namespace capsule
