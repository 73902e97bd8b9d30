// SPDX-License-Identifier: Apache-2.0
// Private helpers for the TOML loaders: a per-file diagnostic context and `Fields`, a view of one
// TOML table that knows which keys the format allows, reports unknown keys with a "did you
// mean", and reads typed values, reporting wrong types at their exact position.
#pragma once

#include <toml++/toml.h>

#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/capsule.hpp"
#include "capsule/diag.hpp"
#include "capsule/identifier.hpp"
#include "capsule/load.hpp"
#include "capsule/text.hpp"
#include "capsule/vocab.hpp"

namespace capsule::detail {

class FileContext {
 public:
  FileContext(const std::string& path, Diagnostics& out) : path_(path), out_(out) {}

  const std::string& path() const { return path_; }
  bool failed() const { return errors_ != 0; }

  SourceLoc at(const toml::source_region& region) const {
    return SourceLoc{path_, region.begin.line, region.begin.column};
  }
  SourceLoc at(const toml::node& node) const { return at(node.source()); }

  void report(Severity severity, DiagCode code, SourceLoc where, std::string message,
              std::string help = {}, std::vector<std::string> notes = {}) {
    if (severity == Severity::Error) ++errors_;
    out_.push_back(Diagnostic{severity, code, std::move(where), std::move(message), std::move(notes),
                              std::move(help)});
  }
  void error(DiagCode code, SourceLoc where, std::string message, std::string help = {},
             std::vector<std::string> notes = {}) {
    report(Severity::Error, code, std::move(where), std::move(message), std::move(help), std::move(notes));
  }

 private:
  const std::string& path_;
  Diagnostics& out_;
  std::size_t errors_ = 0;
};

std::string_view type_name(const toml::node& node);

/// Reports `text`, the value of `what` at `where`, as invalid-identifier unless it is an
/// identifier of `kind`; returns whether it is one.
bool check_identifier(FileContext& context, const SourceLoc& where, std::string_view what, std::string_view text,
                      IdentifierKind kind);

/// Renders a TOML value compactly (`[1, 4]`, `"x"`, `{a = 1}`) for payloads.
std::string render_value(const toml::node& node);
/// render_value clipped to a length a message may quote (see `clipped`).
std::string render_for_message(const toml::node& node);

class Fields {
 public:
  /// `what` names the table in messages, e.g. "capsule" or "contracts.shape".
  Fields(FileContext& context, const toml::table& table, std::string what,
         std::span<const std::string_view> allowed);
  Fields(FileContext& context, const toml::table& table, std::string what,
         std::initializer_list<std::string_view> allowed)
      : Fields(context, table, std::move(what), std::span<const std::string_view>(allowed.begin(), allowed.size())) {}

  const toml::table& table() const { return table_; }
  SourceLoc where() const { return context_.at(table_); }
  const toml::node* node(std::string_view key) const { return table_.get(key); }

  std::optional<std::string> string(std::string_view key);
  /// A string that must be an identifier of `kind` (capsule/identifier.hpp). An invalid one is
  /// reported as invalid-identifier at its position and still returned, so that the checks that
  /// follow run and every problem is reported in one run; the file fails to load in any case.
  std::optional<std::string> identifier(std::string_view key, IdentifierKind kind);
  std::optional<bool> boolean(std::string_view key);
  std::optional<std::int64_t> integer(std::string_view key);
  std::optional<Date> date(std::string_view key);
  const toml::table* table(std::string_view key);
  const toml::array* array(std::string_view key);

  template <class E>
  std::optional<E> vocab(std::string_view key) {
    const toml::node* value = node(key);
    if (value == nullptr) return std::nullopt;
    return vocab_value<E>(context_, *value, key);
  }

  /// Reports `key` missing from this table.
  void missing(std::string_view key, std::string_view expectation);

 private:
  void wrong_type(std::string_view key, const toml::node& value, std::string_view expected);

  FileContext& context_;
  const toml::table& table_;
  std::string what_;
};

/// Parses a vocabulary spelling held by `value`, reporting wrong types and unknown spellings.
template <class E>
std::optional<E> vocab_value(FileContext& context, const toml::node& value, std::string_view key) {
  const auto* text = value.as_string();
  if (text == nullptr) {
    context.error(DiagCode::WrongType, context.at(value),
                  str("`", key, "` must be a string naming a ", VocabTable<E>::kind, ", got ",
                      type_name(value), " ", render_for_message(value)));
    return std::nullopt;
  }
  auto parsed = parse<E>(text->get());
  if (!parsed) {
    context.error(DiagCode::UnknownSpelling, context.at(value), str("`", key, "`: ", parsed.error().message),
                  parsed.error().help());
    return std::nullopt;
  }
  return *parsed;
}

/// Opens `file`, computes its SHA-256 and parses it; reports I/O and TOML syntax errors.
struct ParsedFile {
  std::string text;
  std::string sha256;
};
std::optional<ParsedFile> read_file(const std::string& path, Diagnostics& out);
/// read_file for a file already opened (and checked) by the caller: reads `fd` to its end, to the
/// same size limit; `name` is what diagnostics call it. Does not close `fd`.
std::optional<ParsedFile> read_descriptor(int fd, const std::string& name, Diagnostics& out);

/// The name diagnostics give standard input (read for capsule::kStdinPath, capsule/load.hpp).
inline constexpr std::string_view kStdinName = "<stdin>";
/// The name diagnostics and sources give input `path`: `<stdin>` for `-`, else the path.
std::string input_name(const std::string& path);
/// read_file, except that `-` reads standard input to end of file, to the same size limit.
std::optional<ParsedFile> read_input(const std::string& path, Diagnostics& out);
std::optional<toml::table> parse_toml(std::string_view text, const std::string& path, Diagnostics& out);

/// Checks `schema = 1`.
bool check_schema(FileContext& context, Fields& top);

}  // namespace capsule::detail
