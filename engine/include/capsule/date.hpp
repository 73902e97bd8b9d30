// SPDX-License-Identifier: Apache-2.0
// Calendar dates as capsule reads them (trust `expires`, waiver `expires`, CAPSULE_TODAY): one
// strict rule everywhere, so no spelling is read as a different day than it says.
#pragma once

#include <string>
#include <string_view>

#include "capsule/capsule.hpp"
#include "capsule/result.hpp"

namespace capsule {

/// The years capsule accepts. Earlier or later dates are typos (or attempts to make a trust
/// never lapse, or always lapse) rather than decisions.
inline constexpr int kFirstDateYear = 1970;
inline constexpr int kLastDateYear = 9999;

/// Why year/month/day is not a date capsule accepts, or "" when it is: a real calendar day
/// (month 1-12, day within the month, 29 February only in leap years) in the accepted years.
std::string date_problem(long long year, long long month, long long day);

/// Parses exactly `YYYY-MM-DD` (four, two and two digits); the error says what is wrong.
Result<Date, std::string> parse_date(std::string_view text);

}  // namespace capsule
