// SPDX-License-Identifier: Apache-2.0
#include "capsule/date.hpp"

#include "capsule/text.hpp"

namespace capsule {
namespace {

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

long long number(std::string_view digits) {
  long long value = 0;
  for (const char c : digits) value = value * 10 + (c - '0');
  return value;
}

}  // namespace

std::string date_problem(long long year, long long month, long long day) {
  if (year < kFirstDateYear || year > kLastDateYear) {
    return str("year ", year, " is out of range (", kFirstDateYear, " to ", kLastDateYear, ")");
  }
  if (month < 1 || month > 12) return str("month ", month, " is out of range (1 to 12)");
  // Checked before building a Date: std::chrono::month and day keep only 8 bits, so 257 would
  // silently become 1.
  const std::chrono::year_month_day_last last{std::chrono::year{static_cast<int>(year)},
                                              std::chrono::month_day_last{std::chrono::month{static_cast<unsigned>(month)}}};
  const auto days_in_month = static_cast<unsigned>(last.day());
  if (day < 1 || day > static_cast<long long>(days_in_month)) {
    return str("day ", day, " is out of range (", format_date(Date{last.year(), last.month(), std::chrono::day{1}})
                                                      .substr(0, 7),
               " has days 1 to ", days_in_month, ")");
  }
  return {};
}

Result<Date, std::string> parse_date(std::string_view text) {
  const bool shaped = text.size() == 10 && text[4] == '-' && text[7] == '-' && all_digits(text.substr(0, 4)) &&
                      all_digits(text.substr(5, 2)) && all_digits(text.substr(8, 2));
  if (!shaped) return fail(std::string("expected a date written YYYY-MM-DD, e.g. 2027-06-30"));
  const long long year = number(text.substr(0, 4));
  const long long month = number(text.substr(5, 2));
  const long long day = number(text.substr(8, 2));
  if (std::string problem = date_problem(year, month, day); !problem.empty()) return fail(std::move(problem));
  return Date{std::chrono::year{static_cast<int>(year)}, std::chrono::month{static_cast<unsigned>(month)},
              std::chrono::day{static_cast<unsigned>(day)}};
}

}  // namespace capsule
