// SPDX-License-Identifier: Apache-2.0
// Lint rule ids as people write them, in `--deny`/`--allow` and in capsule-lint.toml's `deny` and
// `allow`: one resolution, so the command line and the file accept and refuse the same ids for the
// same reasons. Each caller words the problems in its own terms (a usage error naming the flag, a
// diagnostic at the entry's file:line:col).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/lint.hpp"

namespace capsule {

/// Why a rule that blocks loading may not be allowed or ranked below error (said once, by
/// `--allow`, `allow` and `[severity]` alike).
inline constexpr std::string_view kBlocksLoadingReason =
    "a file with that error does not load, so every other command would still refuse it";

/// The list an id was written in.
enum class RuleList : std::uint8_t { Deny, Allow };

/// One id of a deny or allow list that does not apply.
struct RuleIdProblem {
  enum class Kind : std::uint8_t {
    Unknown,           ///< no rule has that id (`warnings` counts in a deny list only)
    CannotBeAllowed,   ///< allowing a rule that blocks loading
    DeniedAndAllowed,  ///< allowed although the deny list names it
    Repeated,          ///< named earlier in the same list
  };
  Kind kind;
  RuleList list;
  std::size_t index;       ///< position in that list
  std::string id;          ///< as written
  std::string suggestion;  ///< Unknown only: the nearest id (nearest_rule_id), or empty
};

/// The deny and allow lists as overrides, and every id that does not apply, deny list first,
/// each list in order. An id with a problem contributes nothing.
struct ResolvedRuleIds {
  RuleOverrides overrides;
  std::vector<RuleIdProblem> problems;
};
ResolvedRuleIds resolve_rule_ids(const std::vector<std::string>& deny, const std::vector<std::string>& allow);

/// The rule id nearest `id` for a did-you-mean, `warnings` included when `with_warnings`; "" when
/// none is near.
std::string nearest_rule_id(std::string_view id, bool with_warnings);

/// The sentence for a problem that needs no caller's wording: "rule `ID` cannot be allowed: …",
/// "rule `ID` is both denied and allowed", "rule `ID` is named twice in `LIST`". Unknown ids are
/// worded by the caller, which knows whether it quotes a flag or a key.
std::string describe(const RuleIdProblem& problem);

}  // namespace capsule
