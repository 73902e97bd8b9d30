// SPDX-License-Identifier: Apache-2.0
// Identifiers are a documented ASCII set, checked at load (capsule/identifier.hpp): every field
// that holds a name, an evidence name, a provenance symbol or path, or a graph key rejects
// controls, bidi overrides, zero-width characters, lookalike letters and markup, at the
// field's own position. The class is tested field by field, not by one example.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "capsule/identifier.hpp"
#include "capsule/load.hpp"
#include "capsule/text.hpp"

using namespace capsule;

namespace {

/// Hostile spellings, each written as a TOML basic-string body (escapes allowed).
struct Hostile {
  const char* what;
  const char* toml;
};
const std::vector<Hostile> kHostile{
    {"newline", "x\\nerror: forged"},
    {"escape", "x\\u001b[2K"},
    {"bell", "x\\u0007"},
    {"nul", "x\\u0000y"},
    {"delete", "x\\u007f"},
    {"c1 control", "x\\u0085"},
    {"bidi override", "x\\u202ey"},
    {"bidi isolate", "x\\u2066y"},
    {"zero-width space", "x\\u200by"},
    {"zero-width joiner", "x\\u200dy"},
    {"byte order mark", "\\ufeffx"},
    {"cyrillic lookalike", "r\\u0435ference"},
    {"backtick", "x`y"},
    {"pipe", "x|y"},
    {"html", "<img>"},
    {"mention", "@octocat"},
    {"workflow command", "::error::x"},
};

bool reports_identifier_at(const Diagnostics& out, std::uint32_t line) {
  return std::any_of(out.begin(), out.end(), [&](const Diagnostic& d) {
    return d.code == DiagCode::InvalidIdentifier && d.severity == Severity::Error && d.where.line == line;
  });
}

/// A valid catalog with a placeholder `@FIELD@` for the field under test; every other field
/// holds a valid identifier.
std::string catalog_with(std::string_view field, std::string_view value) {
  const auto pick = [&](std::string_view name, std::string_view fallback) {
    return name == field ? std::string(value) : std::string(fallback);
  };
  return str("schema = 1\n",                                                              // 1
             "module = \"", pick("module", "gallery"), "\"\n",                               // 2
             "[[capsule]]\n",                                                                // 3
             "name = \"", pick("name", "gallery.relu"), "\"\n",                              // 4
             "op = \"relu\"\nprovider = \"reference\"\ndevice = \"cpu\"\n",                  // 5-7
             "trust = \"checked\"\nvjp = \"torchlean-tape\"\nreduction = \"n/a\"\n",         // 8-10
             "contracts.shape = { claim = \"shape-safety\", evidence = { kind = \"runtime-guard\", name = \"",
             pick("guard", "shape checks"), "\" } }\n",                                      // 11
             "contracts.layout = { claim = \"layout-compatibility\", layout = \"canonical-tensor\", "
             "evidence = { kind = \"runtime-guard\", name = \"typed layout\" } }\n",          // 12
             "contracts.value = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"",
             pick("suite", "gallery.values"), "\" }, provenance = [{ path = \"", pick("path", "engine/x.cpp"),
             "\", symbol = \"", pick("symbol", "relu_forward"), "\", build_target = \"",
             pick("build_target", "capsule_engine"), "\" }] }\n",                            // 13
             "contracts.vjp = { claim = \"vjp-refinement\", mode = \"torchlean-tape\", evidence = { kind = "
             "\"test-suite\", name = \"gallery.vjps\" } }\n");                                // 14
}

std::string profile_with(std::string_view field, std::string_view value) {
  return str("schema = 1\n",                                                                       // 1
             "name = \"", field == "profile" ? std::string(value) : "gallery", "\"\n",                 // 2
             "device = \"cpu\"\nprovider = \"auto\"\n",                                                // 3-4
             "modules = [\"reference\", \"", field == "listed" ? std::string(value) : "gallery", "\"]\n",  // 5
             "[availability]\ndevices = [\"cpu\"]\nproviders = [\"reference\"]\n");
}

std::string graph_with(std::string_view field, std::string_view value) {
  return str("schema = 1\n",                                                                  // 1
             "name = \"", field == "graph" ? std::string(value) : "mlp", "\"\n",                  // 2
             "[[node]]\nid = 0\nkind = \"input\"\n",                                           // 3-5
             field == "key" ? str("\"", value, "\" = [2, 3]\n") : std::string("shape = [2, 3]\n"));  // 6
}

}  // namespace

TEST_SUITE("identifiers") {
  TEST_CASE("the rules accept the shipped spellings and reject each hostile class") {
    for (const char* name : {"reference", "native_cuda.relu", "libtorch.sdpa_forward", "checked-cpu", "a1"}) {
      CAPTURE(name);
      CHECK_FALSE(identifier_problem(name, IdentifierKind::Name).has_value());
    }
    for (const char* label : {"portable runtime shape checks", "CUDA buffer shape/size checks at the native boundary",
                              "backend profile requires vjp=torchlean-tape", "reference.values"}) {
      CAPTURE(label);
      CHECK_FALSE(identifier_problem(label, IdentifierKind::Label).has_value());
    }
    CHECK_FALSE(identifier_problem("engine/src/reference/relu.cpp", IdentifierKind::Path).has_value());

    for (const std::string& bad : {std::string("a b"), std::string(".hidden"), std::string("r\xd0\xb5" "ference"),
                                  std::string("a\nb"), std::string("a\x1b" "b"), std::string("a\0b", 3),
                                  std::string("a\xe2\x80\xae" "b"), std::string("a\xe2\x80\x8b" "b"),
                                  std::string("a\xff"), std::string(129, 'a')}) {
      CAPTURE(bad);
      CHECK(identifier_problem(bad, IdentifierKind::Name).has_value());
    }
    for (const std::string& bad : {std::string("x`y"), std::string("x|y"), std::string("<b>"), std::string("@team"),
                                  std::string(" lead"), std::string("trail "), std::string("two  spaces"),
                                  std::string("a\tb"), std::string("a\xc2\x85")}) {
      CAPTURE(bad);
      CHECK(identifier_problem(bad, IdentifierKind::Label).has_value());
    }
    CHECK(identifier_problem("a b.cpp", IdentifierKind::Path).has_value());
  }

  TEST_CASE("the message names the offending character without quoting raw bytes") {
    const auto cyrillic = identifier_problem("r\xd0\xb5" "ference", IdentifierKind::Name);
    REQUIRE(cyrillic.has_value());
    CHECK(*cyrillic == "character 2 is U+0435 (not ASCII)");
    const auto bidi = identifier_problem("ab\xe2\x80\xae", IdentifierKind::Name);
    REQUIRE(bidi.has_value());
    CHECK(*bidi == "character 3 is U+202E (not ASCII)");
    const auto broken = identifier_problem("ab\xff", IdentifierKind::Name);
    REQUIRE(broken.has_value());
    CHECK(*broken == "character 3 is the byte 0xFF (not UTF-8)");
    const auto newline = identifier_problem("a\nb", IdentifierKind::Label);
    REQUIRE(newline.has_value());
    CHECK(*newline == "character 2 is U+000A (a control character)");
  }

  TEST_CASE("every identifier field of a catalog rejects every hostile class at its own line") {
    {
      Diagnostics out;
      CHECK(parse_catalog(catalog_with("", ""), "valid.toml", LoadOptions{}, out).has_value());
      CHECK(out.empty());
    }
    const std::vector<std::pair<const char*, std::uint32_t>> fields{
        {"module", 2}, {"name", 4}, {"guard", 11}, {"suite", 13}, {"path", 13}, {"symbol", 13}, {"build_target", 13}};
    for (const auto& [field, line] : fields) {
      for (const Hostile& hostile : kHostile) {
        // Labels may hold what names may not (spaces); none of the hostile spellings is a space.
        const std::string field_name = field;
        CAPTURE(field_name);
        const std::string hostile_what = hostile.what;
        CAPTURE(hostile_what);
        Diagnostics out;
        const auto module = parse_catalog(catalog_with(field, hostile.toml), "hostile.toml", LoadOptions{}, out);
        CHECK_FALSE(module.has_value());
        CHECK(reports_identifier_at(out, line));
      }
    }
  }

  TEST_CASE("profile names, listed module names and graph names and keys reject every hostile class") {
    for (const Hostile& hostile : kHostile) {
      const std::string hostile_what = hostile.what;
        CAPTURE(hostile_what);
      for (const auto& [field, line] : std::vector<std::pair<const char*, std::uint32_t>>{{"profile", 2}, {"listed", 5}}) {
        const std::string field_name = field;
        CAPTURE(field_name);
        Diagnostics out;
        CHECK_FALSE(parse_profile(profile_with(field, hostile.toml), "hostile.profile.toml", LoadOptions{}, out));
        CHECK(reports_identifier_at(out, line));
      }
      for (const auto& [field, line] : std::vector<std::pair<const char*, std::uint32_t>>{{"graph", 2}, {"key", 6}}) {
        const std::string field_name = field;
        CAPTURE(field_name);
        Diagnostics out;
        CHECK_FALSE(parse_graph(graph_with(field, hostile.toml), "hostile.graph.toml", out));
        CHECK(reports_identifier_at(out, line));
      }
    }
    Diagnostics out;
    CHECK(parse_profile(profile_with("", ""), "valid.profile.toml", LoadOptions{}, out).has_value());
    CHECK(parse_graph(graph_with("", ""), "valid.graph.toml", out).has_value());
    CHECK(out.empty());
  }
}
