// SPDX-License-Identifier: Apache-2.0
#include "toml_reader.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <variant>

#include "capsule/date.hpp"
#include "capsule/sha256.hpp"
#include "capsule/toml_limits.hpp"

namespace capsule::detail {

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    case toml::node_type::none: return "nothing";
  }
  return "value";
}


std::string render_value(const toml::node& node) {
  std::string out;
  if (const auto* s = node.as_string()) {
    out += toml_quoted(s->get());
  } else if (const auto* i = node.as_integer()) {
    out = std::to_string(i->get());
  } else if (const auto* f = node.as_floating_point()) {
    std::ostringstream stream;
    stream << f->get();
    out = stream.str();
  } else if (const auto* b = node.as_boolean()) {
    out = b->get() ? "true" : "false";
  } else if (const auto* a = node.as_array()) {
    out = "[";
    for (std::size_t k = 0; k < a->size(); ++k) {
      if (k != 0) out += ", ";
      out += render_value(*a->get(k));
    }
    out += "]";
  } else if (const auto* t = node.as_table()) {
    out = "{";
    bool first = true;
    for (auto&& [key, value] : *t) {
      out += first ? " " : ", ";
      first = false;
      out += key.str();
      out += " = ";
      out += render_value(value);
    }
    out += first ? "}" : " }";
  } else {
    std::ostringstream stream;
    node.visit([&](const auto& v) { stream << v; });
    out = stream.str();
  }
  return out;
}

std::string render_for_message(const toml::node& node) { return clipped(render_value(node)); }

Fields::Fields(FileContext& context, const toml::table& table, std::string what,
               std::span<const std::string_view> allowed)
    : context_(context), table_(table), what_(std::move(what)) {
  std::vector<std::string_view> names(allowed.begin(), allowed.end());
  for (auto&& [key, value] : table_) {
    bool known = false;
    for (const std::string_view name : names) known = known || key.str() == name;
    if (known) continue;
    const std::string nearest = nearest_name(key.str(), names);
    context_.error(DiagCode::UnknownKey, context_.at(key.source()),
                   str("unknown key `", clipped(key.str()), "` in ", what_, " (expected one of: ",
                       join(std::vector<std::string>(names.begin(), names.end()), ", "), ")"),
                   nearest.empty() ? std::string() : str("did you mean `", nearest, "`?"));
  }
}

void Fields::wrong_type(std::string_view key, const toml::node& value, std::string_view expected) {
  context_.error(DiagCode::WrongType, context_.at(value),
                 str("`", key, "` in ", what_, " must be ", expected, ", got ", type_name(value), " ",
                     render_for_message(value)));
}

void Fields::missing(std::string_view key, std::string_view expectation) {
  context_.error(DiagCode::MissingField, where(), str(what_, " is missing `", key, "` (", expectation, ")"));
}

std::optional<std::string> Fields::string(std::string_view key) {
  const toml::node* value = node(key);
  if (value == nullptr) return std::nullopt;
  if (const auto* text = value->as_string()) return text->get();
  wrong_type(key, *value, "a string");
  return std::nullopt;
}

std::optional<std::string> Fields::identifier(std::string_view key, IdentifierKind kind) {
  std::optional<std::string> text = string(key);
  if (text) check_identifier(context_, context_.at(*node(key)), str(what_, ".", key), *text, kind);
  return text;
}

bool check_identifier(FileContext& context, const SourceLoc& where, std::string_view what, std::string_view text,
                      IdentifierKind kind) {
  // An empty value has its own rule at each site ("must not be empty", a missing name).
  if (text.empty()) return true;
  const std::optional<std::string> problem = identifier_problem(text, kind);
  if (!problem) return true;
  context.error(DiagCode::InvalidIdentifier, where, str("`", what, "` = \"", clipped(text), "\" is not allowed: ", *problem),
                str(identifier_rule(kind)));
  return false;
}

std::optional<bool> Fields::boolean(std::string_view key) {
  const toml::node* value = node(key);
  if (value == nullptr) return std::nullopt;
  if (const auto* flag = value->as_boolean()) return flag->get();
  wrong_type(key, *value, "a boolean (true or false)");
  return std::nullopt;
}

std::optional<std::int64_t> Fields::integer(std::string_view key) {
  const toml::node* value = node(key);
  if (value == nullptr) return std::nullopt;
  if (const auto* number = value->as_integer()) return number->get();
  wrong_type(key, *value, "an integer");
  return std::nullopt;
}

std::optional<Date> Fields::date(std::string_view key) {
  const toml::node* value = node(key);
  if (value == nullptr) return std::nullopt;
  if (const auto* d = value->as_date()) {
    const toml::date day = d->get();
    if (std::string problem = date_problem(day.year, day.month, day.day); !problem.empty()) {
      context_.error(DiagCode::InvalidValue, context_.at(*value),
                     str("`", key, "` in ", what_, " is not a valid date: ", problem));
      return std::nullopt;
    }
    return Date{std::chrono::year{day.year}, std::chrono::month{day.month}, std::chrono::day{day.day}};
  }
  wrong_type(key, *value, "a TOML date such as 2027-06-30");
  return std::nullopt;
}

const toml::table* Fields::table(std::string_view key) {
  const toml::node* value = node(key);
  if (value == nullptr) return nullptr;
  if (const auto* t = value->as_table()) return t;
  wrong_type(key, *value, "a table");
  return nullptr;
}

const toml::array* Fields::array(std::string_view key) {
  const toml::node* value = node(key);
  if (value == nullptr) return nullptr;
  if (const auto* a = value->as_array()) return a;
  wrong_type(key, *value, "an array");
  return nullptr;
}

namespace {

std::string size_words(std::size_t bytes) {
  return bytes % (std::size_t{1} << 20) == 0 ? str(bytes >> 20, " MiB") : str(bytes, " bytes");
}

void too_large(std::string_view text, const std::string& path, Diagnostics& out) {
  const TextPosition where = position_of(text, kMaxTomlBytes);
  out.push_back(Diagnostic{Severity::Error, DiagCode::ParseError, SourceLoc{path, where.line, where.column},
                           str("file is larger than ", size_words(kMaxTomlBytes),
                               ", the most capsule reads from one TOML file (this is where it passes the limit)"),
                           {}, "split the file, or check that it is the file you meant"});
}

void out_of_memory(const std::string& path, Diagnostics& out) {
  out.push_back(Diagnostic{Severity::Error, DiagCode::ParseError, SourceLoc{path, 0, 0},
                           "ran out of memory while reading this file", {}, {}});
}

}  // namespace

namespace {

/// Reads through `next(buffer, wanted)` to the end, up to one byte past the limit and never more
/// (a file may grow, or a pipe be endless, while we read); `next` returns the bytes it read (0 at
/// the end) or the text of a read error. `name` is what diagnostics call the input.
template <class Next>
std::optional<ParsedFile> read_limited(const std::string& name, Diagnostics& out, Next&& next) {
  try {
    // In chunks: most inputs are small, so nothing is allocated up front.
    ParsedFile file;
    char chunk[1 << 16];
    while (file.text.size() <= kMaxTomlBytes) {
      const std::size_t wanted = std::min(sizeof chunk, kMaxTomlBytes + 1 - file.text.size());
      const std::variant<std::size_t, std::string> got = next(chunk, wanted);
      if (const auto* error = std::get_if<std::string>(&got)) {
        out.push_back(Diagnostic{Severity::Error, DiagCode::IoError, SourceLoc{name, 0, 0}, *error, {}, {}});
        return std::nullopt;
      }
      const std::size_t bytes = std::get<std::size_t>(got);
      if (bytes == 0) break;
      file.text.append(chunk, bytes);
    }
    if (file.text.size() > kMaxTomlBytes) {
      too_large(file.text, name, out);
      return std::nullopt;
    }
    file.sha256 = sha256_hex(file.text);
    return file;
  } catch (const std::bad_alloc&) {
    out_of_memory(name, out);
    return std::nullopt;
  }
}

std::optional<ParsedFile> read_stream(std::istream& in, const std::string& name, Diagnostics& out) {
  return read_limited(name, out, [&in](char* buffer, std::size_t wanted) -> std::variant<std::size_t, std::string> {
    if (!in) return std::size_t{0};  // the end was reached by the previous read
    in.read(buffer, static_cast<std::streamsize>(wanted));
    if (in.bad()) return std::string("read failed");
    return static_cast<std::size_t>(in.gcount());
  });
}

}  // namespace

std::optional<ParsedFile> read_file(const std::string& path, Diagnostics& out) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    out.push_back(Diagnostic{Severity::Error, DiagCode::IoError, SourceLoc{path, 0, 0},
                             std::filesystem::exists(path, error) ? "not a regular file" : "no such file", {}, {}});
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.push_back(Diagnostic{Severity::Error, DiagCode::IoError, SourceLoc{path, 0, 0},
                             "cannot open file for reading", {}, {}});
    return std::nullopt;
  }
  return read_stream(in, path, out);
}

std::optional<ParsedFile> read_descriptor(int fd, const std::string& name, Diagnostics& out) {
  return read_limited(name, out, [fd](char* buffer, std::size_t wanted) -> std::variant<std::size_t, std::string> {
    while (true) {
      const ssize_t got = ::read(fd, buffer, wanted);
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno != EINTR) return str("read failed: ", std::strerror(errno));
    }
  });
}

std::string input_name(const std::string& path) { return path == kStdinPath ? std::string(kStdinName) : path; }

std::optional<ParsedFile> read_input(const std::string& path, Diagnostics& out) {
  if (path == kStdinPath) return read_stream(std::cin, std::string(kStdinName), out);
  return read_file(path, out);
}

std::optional<toml::table> parse_toml(std::string_view text, const std::string& path, Diagnostics& out) {
  if (text.size() > kMaxTomlBytes) {
    too_large(text, path, out);
    return std::nullopt;
  }
  const NestingScan nesting = scan_nesting(text, kMaxTomlDepth);
  if (nesting.exceeded) {
    out.push_back(Diagnostic{Severity::Error, DiagCode::ParseError,
                             SourceLoc{path, nesting.deepest.line, nesting.deepest.column},
                             str("nesting deeper than ", kMaxTomlDepth,
                                 " levels, the most capsule reads (every key component, table header "
                                 "component and array counts one level)"),
                             {}, {}});
    return std::nullopt;
  }
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    out.push_back(Diagnostic{Severity::Error, DiagCode::ParseError,
                             SourceLoc{path, error.source().begin.line, error.source().begin.column},
                             str("invalid TOML: ", error.description()), {}, {}});
    return std::nullopt;
  } catch (const std::bad_alloc&) {
    out_of_memory(path, out);
    return std::nullopt;
  }
}

bool check_schema(FileContext& context, Fields& top) {
  const toml::node* schema = top.node("schema");
  if (schema == nullptr) {
    context.error(DiagCode::UnsupportedSchema, top.where(), "missing `schema = 1` at the top of the file");
    return false;
  }
  const auto* number = schema->as_integer();
  if (number == nullptr) {
    // `1.0` renders as 1, which made "unsupported schema 1; this build reads schema 1": say the
    // type, and the value as written.
    std::string written = render_for_message(*schema);
    if (const auto* real = schema->as_floating_point()) {
      const double value = real->get();
      if (std::isfinite(value) && value == std::floor(value) && written.find_first_of(".eE") == std::string::npos) {
        written += ".0";
      }
    }
    context.error(DiagCode::UnsupportedSchema, context.at(*schema),
                  str("`schema` must be the integer 1, got the ", type_name(*schema), " ", written),
                  "write `schema = 1`");
    return false;
  }
  if (number->get() != 1) {
    context.error(DiagCode::UnsupportedSchema, context.at(*schema),
                  str("unsupported schema ", number->get(), "; this build reads schema 1"));
    return false;
  }
  return true;
}

}  // namespace capsule::detail
