// SPDX-License-Identifier: Apache-2.0
// The eager session (semantics §7): opened with a named profile, it plans, gates and binds one
// capsule per op, caches that choice for its whole life, runs every op through the bound
// handler, keeps a tape for autograd, and records every capsule it actually ran.
//
// No fallback: a device with capsules but no linked runtime, or a CUDA profile on a machine
// without a usable CUDA device, fails at open; an op whose capsule has no matching handler fails
// before any code runs.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "capsule/json.hpp"
#include "capsule/report.hpp"
#include "capsule/fingerprint.hpp"
#include "capsule/resolve.hpp"
#include "capsule/runtime/checker.hpp"
#include "capsule/runtime/handler.hpp"
#include "capsule/runtime/message_style.hpp"

namespace capsule {

struct SessionOptions {
  std::string profile;  ///< a profile name in the workspace
  /// Off: the effective policy's VJP mode is `none` (inference); nothing is taped.
  bool gradients = true;
  /// Print backend_log_header (`[TorchLean] backend capsules used:`) at open and the detailed
  /// report rows of every selection to `log`.
  bool show_backend = false;
  /// TorchLean's exact refusal and log texts, or plain ones (capsule/runtime/message_style.hpp).
  MessageStyle message_style = MessageStyle::TorchLean;
  std::ostream* log = nullptr;
  /// Ops to plan, gate and bind at open, so a rejected capsule stops the session before anything
  /// runs. Other ops are selected on first use (and then cached).
  std::vector<Op> preselect;
  /// How often checker evidence is rechecked (docs/checkers.md, "Recheck at run time"). Unset:
  /// the profile's `recheck` policy. Set only to override it (tests).
  std::optional<RecheckPolicy> recheck;
  /// Where a failed recheck writes its reproduction bundle (a new directory inside this one).
  /// Empty: the system's temporary directory.
  std::filesystem::path repro_dir;
  /// The build fingerprint a reproduction bundle records (null: recorded as absent). Must outlive
  /// the session.
  const EnvironmentFingerprint* fingerprint = nullptr;
};

/// A tensor in a session. A Var that requires a gradient refers to its node on the tape.
class Var {
 public:
  Var() = default;
  const Tensor& value() const { return value_; }
  const Shape& shape() const { return value_.shape(); }
  /// True when the Var was taped (a parameter or a result depending on one). After the session's
  /// tape is cleared, the session treats it as a constant.
  bool requires_grad() const { return node_ >= 0; }

 private:
  friend class Session;
  friend class Gradients;
  Var(Tensor value, std::int32_t node, std::uint64_t tape) : value_(std::move(value)), node_(node), tape_(tape) {}
  Tensor value_;
  std::int32_t node_ = -1;
  std::uint64_t tape_ = 0;  ///< which tape `node_` indexes (the session's tape generation)
};

/// The gradients of one backward pass, looked up by the Vars of that tape.
class Gradients {
 public:
  /// The gradient of `var`, or an undefined Tensor when nothing flowed into it (or `var` belongs
  /// to another tape).
  Tensor of(const Var& var) const;

 private:
  friend class Session;
  std::vector<Tensor> by_node_;
  std::uint64_t tape_ = 0;
};

/// The rechecks of one obligation of one capsule: which checker, under which policy, how many of
/// the obligation's calls were seen, checked and passed.
struct RecheckUse {
  Obligation obligation = Obligation::Value;
  std::string checker;
  CheckerCoverage coverage = CheckerCoverage::Full;
  RecheckPolicy policy;
  std::uint64_t calls = 0;   ///< calls of the obligation (forward values, or backward VJPs)
  std::uint64_t run = 0;     ///< checks run
  std::uint64_t passed = 0;  ///< checks passed (a failed check stops the run)
};

/// One capsule the session ran, with how often.
struct CapsuleUse {
  Op op = Op::Custom;
  std::shared_ptr<const Capsule> capsule;
  std::string handler;
  std::uint64_t forward_calls = 0;  ///< calls made by the program
  std::uint64_t vjp_calls = 0;      ///< calls made while composing VJPs on the tape
  std::uint64_t adjoint_calls = 0;  ///< calls of the handler's own adjoint kernel
  /// `external-autograd` capsules: the runtime that owns their regions (the handler's
  /// `autograd_runtime`), regions recorded on a tape, and regions whose VJP ran.
  std::string autograd_runtime;
  std::uint64_t boundary_regions = 0;
  std::uint64_t boundary_vjps = 0;
  /// One entry per obligation whose evidence is a checker (value first, then vjp).
  std::vector<RecheckUse> rechecks;
};

class Session {
 public:
  /// Resolves the profile, validates its device (TorchLean's texts), checks the device's
  /// execution runtime, then selects every op of `options.preselect`. `handlers` must outlive the
  /// session. Errors are prefixed `torch eager session: `.
  static RuntimeResult<Session> open(const Workspace& workspace, const HandlerRegistry& handlers,
                                     SessionOptions options);
  /// As above, with the registry whose checkers run the rechecks of every capsule with checker
  /// evidence (bound when the capsule is selected; a name not registered for the capsule's op and
  /// device, or a coverage or obligation other than the catalog's, is a binding-rejected error).
  /// Without a registry such a capsule is rejected the same way: a check is never skipped.
  /// `checkers` must outlive the session.
  static RuntimeResult<Session> open(const Workspace& workspace, const HandlerRegistry& handlers,
                                     const CheckerRegistry& checkers, SessionOptions options);

  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  const Profile& profile() const;
  /// The profile's policy with the session's VJP mode (`none` when gradients are off).
  const KernelPolicy& policy() const;
  bool gradients() const;
  /// The profile file and catalog files this session planned from, with digests.
  const std::vector<SourceFile>& sources() const;

  /// A value with no gradient.
  Var constant(Tensor value) const { return Var(std::move(value), -1, 0); }
  /// A leaf whose gradient backward() computes. With gradients off it is a constant.
  Var parameter(Tensor value);

  /// Runs `op` through the session's capsule for it (selected on first use, then cached). When
  /// gradients are on and an input requires a gradient, the call is taped.
  RuntimeResult<Var> call(Op op, std::span<const Var> inputs, const OpAttrs& attrs = {});
  RuntimeResult<Var> call(Op op, std::initializer_list<Var> inputs, const OpAttrs& attrs = {}) {
    return call(op, std::span<const Var>(inputs.begin(), inputs.size()), attrs);
  }

  /// Backpropagates from `root` (seeded with ones) through the tape, in reverse order, composing
  /// each local VJP as the node's capsule says: `torchlean-tape` rules dispatch runtime ops
  /// through this session's capsules, `backend-vjp` calls the handler's own backward,
  /// `external-autograd` calls the node's autograd boundary, and `none` is an error naming the
  /// capsule. A node's saved state and boundary are freed once its backward ran, so a second
  /// backward through such a node is an error (record the forward again).
  RuntimeResult<Gradients> backward(const Var& root);
  /// Forgets the tape, freeing every node's saved state and autograd boundary. Vars recorded on it
  /// are constants to this session afterwards: their node indices are never confused with the
  /// next tape's.
  void clear_tape();
  std::size_t tape_size() const;
  /// True when `var` is a node of this session's current tape (so backward reaches it).
  bool on_tape(const Var& var) const;

  /// The executable kernel for `op`: cached, or planned, gated, validated and bound now.
  RuntimeResult<const ExecutableKernel*> select(Op op);
  /// How many ops have a cached selection.
  std::size_t selection_count() const;

  /// Every capsule that ran, in first-use order.
  std::vector<CapsuleUse> capsules_used() const;

  /// Opaque implementation (defined in session.cpp).
  struct State;

 private:
  explicit Session(std::unique_ptr<State> state);
  static RuntimeResult<Session> open_with(const Workspace& workspace, const HandlerRegistry& handlers,
                                          const CheckerRegistry* checkers, SessionOptions options);
  std::unique_ptr<State> state_;
};

/// `capsules used (N):` then one line per capsule:
/// `  {op} -> {capsule} ({provider}/{device}, {trust}, vjp={mode}): {n} forward, {m} in VJPs[, {k} adjoint]`,
/// and under each `external-autograd` capsule the boundary it hands its regions across:
/// `    external-autograd boundary: {runtime}, one region per call: {r} recorded, {v} backward`,
/// and under each capsule with checker evidence, one line per checked obligation:
/// `    recheck {obligation} by {checker} ({coverage}, {policy}): {n} of {c} calls checked, {p} passed`.
std::string capsules_used_text(std::span<const CapsuleUse> uses);
/// The JSON array of capsules used (objects with op, capsule, provider, device, trust, vjp,
/// handler, forward_calls, vjp_calls, adjoint_calls; `external-autograd` capsules add
/// `boundary`: {runtime, region, regions_recorded, region_vjps}; capsules with checker evidence
/// add `rechecks`: [{obligation, checker, coverage, policy, calls, checks_run, checks_passed}]).
void write_capsules_used_json(JsonWriter& json, std::span<const CapsuleUse> uses);

/// Ops whose torchlean-tape VJP rule calls the handler's adjoint kernel (the others compose their
/// VJP from runtime ops only).
bool vjp_rule_uses_adjoint(Op op);
/// The ops a torchlean-tape VJP rule for `op` dispatches, so callers can preselect them.
std::vector<Op> vjp_rule_ops(Op op);

}  // namespace capsule
