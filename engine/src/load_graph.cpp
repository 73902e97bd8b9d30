// SPDX-License-Identifier: Apache-2.0
// Graph loader (docs/format.md#graphs) and the IR op mapping (docs/format.md#ir-spellings).
#include <algorithm>
#include <unordered_set>

#include "capsule/load.hpp"
#include "capsule/op_arity.hpp"
#include "toml_reader.hpp"

namespace capsule {
namespace {

struct IrAlias {
  std::string_view kind;
  Op op;
};
// TorchLean's IR spellings that differ from the op names (docs/format.md#ir-spellings).
constexpr std::array<IrAlias, 9> kIrAliases{{{"mul_elem", Op::Mul},
                                              {"max_elem", Op::Max},
                                              {"min_elem", Op::Min},
                                              {"transpose", Op::Permute},
                                              {"broadcast_to", Op::Broadcast},
                                              {"flatten", Op::Reshape},
                                              {"sum", Op::ReduceSum},
                                              {"layernorm", Op::LayerNorm},
                                              {"batch_norm_eval", Op::BatchNorm}}};
constexpr std::array<std::string_view, 3> kNoKernelKinds{"input", "const", "detach"};

std::vector<std::string_view> all_kind_names() {
  std::vector<std::string_view> names(kNoKernelKinds.begin(), kNoKernelKinds.end());
  for (const IrAlias& alias : kIrAliases) names.push_back(alias.kind);
  for (const auto& entry : VocabTable<Op>::entries) names.push_back(entry.second);
  return names;
}

/// "exactly 2", "2 or 3", "at least 1", "none".
std::string expected_count(OpArity arity) {
  if (arity.max == 0) return "none";
  if (arity.min == arity.max) return str("exactly ", arity.min);
  if (arity.max == std::numeric_limits<std::size_t>::max()) return str("at least ", arity.min);
  if (arity.max == arity.min + 1) return str(arity.min, " or ", arity.max);
  return str(arity.min, " to ", arity.max);
}

/// The inputs a node of `kind` takes: none for `input` and `const`, one for `detach`, the op's
/// convention otherwise (op_arity, the one table).
OpArity node_arity(std::string_view kind, const std::optional<Op>& op) {
  if (op) return op_arity(*op);
  if (kind == "detach") return {1, 1};
  return {0, 0};  // input, const
}

/// Checks a `shape` payload: an array of non-negative integers (a reshape target may hold one
/// -1), whose element count fits in 63 bits. A float, NaN or negative dimension, or an overflow,
/// is one invalid-graph diagnostic at the offending value.
void check_shape(detail::FileContext& context, const toml::node& value, std::uint32_t node_id, bool reshape) {
  const auto* dims = value.as_array();
  if (dims == nullptr) {
    context.error(DiagCode::InvalidGraph, context.at(value),
                  str("node ", node_id, " `shape` must be an array of non-negative integers, got ",
                      detail::render_for_message(value)));
    return;
  }
  std::int64_t elements = 1;
  bool overflow = false;
  std::size_t inferred = 0;
  for (const toml::node& dim : *dims) {
    const auto* number = dim.as_integer();
    if (number == nullptr) {
      context.error(DiagCode::InvalidGraph, context.at(dim),
                    str("node ", node_id, " shape dimension ", detail::render_for_message(dim),
                        " is not an integer (expected a non-negative integer)"));
      continue;
    }
    const std::int64_t n = number->get();
    if (reshape && n == -1 && ++inferred == 1) continue;
    if (n < 0) {
      context.error(DiagCode::InvalidGraph, context.at(dim),
                    str("node ", node_id, " shape dimension ", n, " is negative (expected a non-negative integer",
                        reshape ? ", or one -1 to infer" : "", ")"));
      continue;
    }
    if (!overflow && __builtin_mul_overflow(elements, n, &elements)) {
      overflow = true;
      context.error(DiagCode::InvalidGraph, context.at(value),
                    str("node ", node_id, " shape ", detail::render_for_message(value),
                        " has more elements than a 64-bit count holds"));
    }
  }
}

}  // namespace

std::optional<Op> ir_node_op(std::string_view kind, bool& known) {
  known = true;
  for (const std::string_view none : kNoKernelKinds) {
    if (kind == none) return std::nullopt;
  }
  for (const IrAlias& alias : kIrAliases) {
    if (kind == alias.kind) return alias.op;
  }
  if (auto op = parse<Op>(kind)) return *op;
  known = false;
  return std::nullopt;
}

Diagnostics check_well_formed(const Graph& graph) {
  Diagnostics out;
  // Ids are usually dense (0..n-1), so a bitmap makes this linear with a tiny constant; sparse
  // ids fall back to a hash set.
  std::uint32_t max_id = 0;
  for (const GraphNode& node : graph.nodes) max_id = std::max(max_id, node.id);
  const bool dense = max_id <= 4 * graph.nodes.size() + 1024;
  std::vector<bool> seen_bits(dense ? std::size_t{max_id} + 1 : 0);
  std::unordered_set<std::uint32_t> seen_set;
  if (!dense) seen_set.reserve(graph.nodes.size());
  const auto seen = [&](std::uint32_t id) {
    if (dense) return id < seen_bits.size() && seen_bits[id];
    return seen_set.count(id) != 0;
  };
  for (const GraphNode& node : graph.nodes) {
    for (const std::uint32_t input : node.inputs) {
      if (!seen(input)) {
        out.push_back(Diagnostic{Severity::Error, DiagCode::InvalidGraph, node.where,
                                 str("node ", node.id, " takes input ", input, ", which is not an earlier node"),
                                 {}, "inputs must name nodes declared before this one"});
      }
    }
    if (seen(node.id)) {
      out.push_back(Diagnostic{Severity::Error, DiagCode::InvalidGraph, node.where,
                               str("duplicate node id ", node.id), {}, "node ids must be unique"});
    } else if (dense) {
      seen_bits[node.id] = true;
    } else {
      seen_set.insert(node.id);
    }
  }
  return out;
}

std::optional<Graph> parse_graph(std::string_view text, const std::string& path, Diagnostics& out) {
  auto root = detail::parse_toml(text, path, out);
  if (!root) return std::nullopt;
  detail::FileContext context(path, out);
  detail::Fields top(context, *root, "graph", {"schema", "name", "node"});
  detail::check_schema(context, top);
  Graph graph;
  graph.source.path = path;
  graph.name = top.identifier("name", IdentifierKind::Name).value_or("");
  const toml::array* nodes = top.array("node");
  if (nodes == nullptr && top.node("node") == nullptr) top.missing("node", "at least one [[node]] table");
  if (nodes != nullptr && nodes->empty()) {
    context.error(DiagCode::InvalidGraph, context.at(*nodes), "graph has no nodes (`node = []`)",
                  "declare at least one [[node]] table");
  }
  const std::vector<std::string_view> kinds = all_kind_names();
  if (nodes != nullptr) {
    graph.nodes.reserve(nodes->size());
    for (const toml::node& entry : *nodes) {
      const auto* table = entry.as_table();
      if (table == nullptr) {
        context.error(DiagCode::WrongType, context.at(entry),
                      str("each `node` entry must be a [[node]] table, got ", detail::type_name(entry)));
        continue;
      }
      GraphNode node;
      node.where = context.at(*table);
      const toml::node* id = table->get("id");
      if (id == nullptr || id->as_integer() == nullptr || id->as_integer()->get() < 0 ||
          id->as_integer()->get() > std::int64_t{0xffffffff}) {
        context.error(id == nullptr ? DiagCode::MissingField : DiagCode::WrongType,
                      id == nullptr ? node.where : context.at(*id),
                      id == nullptr ? std::string("node is missing `id` (a non-negative integer)")
                                    : str("node `id` must be a non-negative integer, got ", detail::render_for_message(*id)));
      } else {
        node.id = static_cast<std::uint32_t>(id->as_integer()->get());
      }
      bool kind_known = false;
      const toml::node* kind = table->get("kind");
      if (kind == nullptr || kind->as_string() == nullptr) {
        context.error(kind == nullptr ? DiagCode::MissingField : DiagCode::WrongType,
                      kind == nullptr ? node.where : context.at(*kind),
                      "node `kind` must be a string: input, const, detach, an op or an IR spelling");
      } else {
        node.kind = kind->as_string()->get();
        bool known = false;
        node.op = ir_node_op(node.kind, known);
        kind_known = known;
        if (!known) {
          const std::string nearest = nearest_name(node.kind, kinds);
          context.error(DiagCode::UnknownSpelling, context.at(*kind),
                        str("unknown node kind `", node.kind, "` (expected input, const, detach, an op, or an IR spelling; docs/format.md#graphs)"),
                        nearest.empty() ? std::string() : "did you mean `" + nearest + "`?");
        }
      }
      const toml::node* inputs = table->get("inputs");
      bool inputs_typed = true;
      if (inputs != nullptr) {
        const auto* list = inputs->as_array();
        if (list == nullptr) {
          inputs_typed = false;
          context.error(DiagCode::WrongType, context.at(*inputs), "node `inputs` must be an array of node ids");
        } else {
          for (const toml::node& input : *list) {
            const auto* number = input.as_integer();
            if (number == nullptr || number->get() < 0 || number->get() > std::int64_t{0xffffffff}) {
              context.error(DiagCode::WrongType, context.at(input),
                            str("node inputs must be non-negative integer ids, got ", detail::render_for_message(input)));
            } else {
              node.inputs.push_back(static_cast<std::uint32_t>(number->get()));
            }
          }
        }
      }
      if (kind_known && inputs_typed) {
        const OpArity arity = node_arity(node.kind, node.op);
        const std::size_t count = inputs == nullptr ? 0 : inputs->as_array()->size();
        if (arity.known && (count < arity.min || count > arity.max)) {
          context.error(DiagCode::InvalidGraph, inputs != nullptr ? context.at(*inputs) : node.where,
                        str("node ", node.id, " (`", node.kind, "`) has ", count, " input", count == 1 ? "" : "s",
                            "; `", node.kind, "` takes ", expected_count(arity)),
                        node.op ? "the op's calling convention is in capsule/runtime/op_args.hpp"
                                : "input and const nodes take no inputs; detach takes one");
        }
      }
      if (const toml::node* shape = table->get("shape")) {
        check_shape(context, *shape, node.id, node.op == Op::Reshape);
      }
      // toml++ keeps keys sorted; payload is printed in file order, so sort by position.
      std::vector<std::pair<const toml::key*, const toml::node*>> extra;
      for (auto&& [key, value] : *table) {
        if (key.str() == "id" || key.str() == "kind" || key.str() == "inputs") continue;
        extra.emplace_back(&key, &value);
      }
      std::sort(extra.begin(), extra.end(), [](const auto& a, const auto& b) {
        const auto& x = a.first->source().begin;
        const auto& y = b.first->source().begin;
        return x.line != y.line ? x.line < y.line : x.column < y.column;
      });
      for (const auto& [key, value] : extra) {
        detail::check_identifier(context, context.at(key->source()), "node key", key->str(), IdentifierKind::Path);
        // Payload keys are free-form, but a near miss of a structural key would silently drop
        // the node's inputs or kind, so it is an error with a suggestion.
        const std::string nearest = nearest_name(key->str(), {"id", "kind", "inputs"});
        if (!nearest.empty() && edit_distance(key->str(), nearest) <= 2 && key->str().size() >= 4) {
          context.error(DiagCode::UnknownKey, context.at(key->source()),
                        str("node key `", key->str(), "` looks like a misspelled `", nearest, "`"),
                        str("did you mean `", nearest, "`?"));
        }
        node.payload.emplace_back(std::string(key->str()), detail::render_value(*value));
      }
      // A node with an error is kept for the id checks below, so later nodes that read it are
      // not blamed for a missing input; the graph as a whole is still rejected.
      if (id != nullptr && id->as_integer() != nullptr) graph.nodes.push_back(std::move(node));
    }
  }
  for (Diagnostic& d : check_well_formed(graph)) {
    context.error(d.code, d.where, d.message, d.help);
  }
  if (context.failed()) return std::nullopt;
  return graph;
}

std::optional<Graph> load_graph(const std::filesystem::path& file, Diagnostics& out) {
  const std::string path = detail::input_name(file.string());
  auto contents = detail::read_input(file.string(), out);
  if (!contents) return std::nullopt;
  auto graph = parse_graph(contents->text, path, out);
  if (graph) graph->source.sha256 = contents->sha256;
  return graph;
}

}  // namespace capsule
