// SPDX-License-Identifier: Apache-2.0
#include "capsule/vocab.hpp"

#include "capsule/text.hpp"

namespace capsule::detail {

VocabError unknown_spelling(std::string_view kind, std::string_view value,
                            const std::vector<std::string_view>& names) {
  std::string listed;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i != 0) listed += " | ";
    listed += names[i];
  }
  VocabError error;
  // The device text is TorchLean's own (§1.1); the others follow the same shape.
  if (kind == "device") {
    error.message = str("unknown device ", clipped(value), " (known targets: ", listed, ")");
  } else {
    error.message = str("unknown ", kind, " `", clipped(value), "` (expected one of: ", listed, ")");
  }
  error.nearest = nearest_name(value, names, /*any_distance=*/true);
  return error;
}

}  // namespace capsule::detail
