// SPDX-License-Identifier: Apache-2.0
// The data a run is decided from: capsule modules (one catalog file each), profiles, and IR
// graphs. These are the in-memory forms of docs/format.md; `load.hpp` builds them from TOML.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "capsule/capsule.hpp"
#include "capsule/policy.hpp"

namespace capsule {

/// A file a decision was made from. Reports print both fields so a reader can tell exactly
/// which bytes were trusted.
struct SourceFile {
  std::string path;
  std::string sha256;

  friend bool operator==(const SourceFile&, const SourceFile&) = default;
};

/// A named group of capsules in local order (§4.2). Built-in and downstream providers each
/// contribute modules; a profile orders them.
struct CapsuleModule {
  std::string name;
  std::vector<Capsule> capsules;
  SourceFile source;  ///< empty path for modules built in code
  SourceLoc where;    ///< position of the `module` key
};

using ModulePtr = std::shared_ptr<const CapsuleModule>;

/// A named run configuration (§4.3, docs/format.md#profiles).
struct Profile {
  std::string name;
  std::string summary;
  KernelPolicy policy;
  Lowering lowering = Lowering::Coalesced;
  std::vector<std::string> module_names;  ///< catalog order; resolved against loaded modules
  std::vector<SourceLoc> module_name_locs;  ///< parallel to module_names, for diagnostics
  Availability availability;
  std::optional<Target> target;  ///< when set, `availability` was derived from it
  /// Catalog files (relative to the profile file) whose modules go first and replace loaded
  /// modules of the same name: TorchLean's `withCapsuleModules`, declared as data.
  std::vector<std::pair<std::string, SourceLoc>> with_catalogs;
  /// Modules supplied in code or loaded from `with_catalogs`; prepended at resolution.
  std::vector<ModulePtr> with_modules;
  /// `plans_nothing = true`: a placeholder (the future_* targets) that is meant to plan no op
  /// yet. Lint reports an unmarked profile that plans nothing, and a marked one that plans
  /// something.
  bool plans_nothing = false;
  /// How often checker evidence is rechecked at run time (`recheck`; default every call).
  RecheckPolicy recheck;
  SourceLoc recheck_where;  ///< the `recheck` key, when given
  SourceFile source;
  SourceLoc where;
};

using ProfilePtr = std::shared_ptr<const Profile>;

/// One IR node (docs/format.md#graphs). `kind` is the spelling from the file; `op` is its kernel op, or
/// empty for input/const/detach, which get no kernel (§5.1).
struct GraphNode {
  std::uint32_t id = 0;
  std::string kind;
  std::optional<Op> op;
  std::vector<std::uint32_t> inputs;
  /// Every other key of the node, in file order, with its value rendered as TOML; printed in
  /// reports so the payload (shapes, axes, padding, ...) is never lost.
  std::vector<std::pair<std::string, std::string>> payload;
  SourceLoc where;
};

struct Graph {
  std::string name;
  std::vector<GraphNode> nodes;
  SourceFile source;
};

/// §5.1: the kernel op of an IR node kind. Sets `known` to false for spellings that are
/// neither an op, an IR alias, nor input/const/detach.
std::optional<Op> ir_node_op(std::string_view kind, bool& known);

/// Checks a graph built in code: unique ids, inputs naming earlier nodes. Errors carry node
/// positions when the graph came from a file.
Diagnostics check_well_formed(const Graph& graph);

}  // namespace capsule
