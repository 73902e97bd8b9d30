// SPDX-License-Identifier: Apache-2.0
// Rechecks at run time (docs/checkers.md, "Recheck at run time"): a session binds the checker that
// a capsule's checker evidence names when it selects the capsule, runs it on the calls the
// profile's recheck policy selects, stops at a failed check with a reproduction bundle, and never
// changes the results of the run it checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "capsule/checkers/standard.hpp"
#include "capsule/handlers/reference.hpp"
#include "capsule/runtime/session.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

using namespace capsule;
using testing::has;

namespace {

const HandlerRegistry& reference_registry() {
  static HandlerRegistry registry;
  static const bool registered = static_cast<bool>(register_reference_handlers(registry));
  REQUIRE(registered);
  return registry;
}

const HandlerSpec& reference(Op op) {
  const RegisteredHandler* handler = reference_registry().find(op, Provider::Reference, Device::Cpu);
  REQUIRE(handler != nullptr);
  return handler->spec;
}

/// The reference matmul with one row of the product corrupted (row 1, or row 0 of a one-row
/// product): an error far above Freivalds' floor.
RuntimeResult<Tensor> corrupt_matmul(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(Tensor out, reference(Op::Matmul).forward(inputs, attrs));
  const std::int64_t cols = out.dim(out.rank() - 1);
  const std::int64_t row = out.numel() > cols ? 1 : 0;
  double* data = out.mutable_data<double>();
  for (std::int64_t j = 0; j < cols; ++j) data[row * cols + j] += 1.0 + static_cast<double>(j);
  return out;
}

/// The ops the test model runs, with every op their torchlean-tape VJP rules dispatch.
std::vector<Op> model_ops() {
  std::set<Op> ops{Op::Matmul, Op::Sub, Op::Mul, Op::ReduceSum};
  for (bool grew = true; grew;) {
    grew = false;
    for (Op op : std::vector<Op>(ops.begin(), ops.end())) {
      for (Op more : vjp_rule_ops(op)) grew = ops.insert(more).second || grew;
    }
  }
  return {ops.begin(), ops.end()};
}

/// The test provider `external`'s handlers: the reference kernels under the inline catalog's
/// guard names, with `matmul` replaced when `matmul` is given.
HandlerRegistry external_handlers(ForwardKernel matmul = nullptr) {
  HandlerRegistry registry;
  for (Op op : model_ops()) {
    HandlerSpec spec = reference(op);
    spec.name = str("test external ", to_string(op));
    spec.provider = Provider::External;
    spec.layouts = {Layout::CanonicalTensor};
    spec.guards = {"shape checks", "typed layout"};
    if (op == Op::Matmul && matmul != nullptr) spec.forward = matmul;
    REQUIRE(registry.add(spec));
  }
  return registry;
}

/// The reference matmul's adjoint with row 0 of dB (the gradient of the second input) moved:
/// a wrong gradient far above the VJP check's floor, which only a VJP recheck can see.
RuntimeResult<std::vector<Tensor>> corrupt_matmul_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                           const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_TRY(std::vector<Tensor> grads, reference(Op::Matmul).backward(inputs, output, grad, attrs));
  Tensor& db = grads.at(1);
  double* data = db.mutable_data<double>();
  for (std::int64_t j = 0; j < db.dim(db.rank() - 1); ++j) data[j] += 0.5 + static_cast<double>(j);
  return grads;
}

/// external_handlers() whose matmul computes its own backward (the reference adjoint, or
/// `backward` when given), for `backend-vjp` capsules.
HandlerRegistry backend_vjp_handlers(BackwardKernel backward = nullptr) {
  HandlerRegistry registry;
  for (Op op : model_ops()) {
    HandlerSpec spec = reference(op);
    spec.name = str("test external ", to_string(op));
    spec.provider = Provider::External;
    spec.layouts = {Layout::CanonicalTensor};
    spec.guards = {"shape checks", "typed layout"};
    if (op == Op::Matmul) {
      spec.backend_vjp = true;
      if (backward != nullptr) spec.backward = backward;
    }
    REQUIRE(registry.add(spec));
  }
  return registry;
}

/// A module of the external provider with every model op; matmul's value evidence is `matmul_value`.
std::string module_text(std::string_view module, std::string_view matmul_value) {
  std::string text(testing::kCatalogHead);
  text.replace(text.find("module = \"inline\""), 17, str("module = \"", module, "\""));
  text.replace(text.find("provider = \"reference\""), 22, "provider = \"external\"");
  for (Op op : model_ops()) {
    text += str("\n[[capsule]]\nname = \"", module, ".", to_string(op), "\"\nop = \"", to_string(op), "\"\n");
    if (op == Op::Matmul) {
      text += str("contracts.value = { claim = \"value-refinement\", evidence = ", matmul_value, " }\n");
    }
  }
  return text;
}

std::string profile_text(std::string_view name, std::string_view module) {
  return str("schema = 1\nname = \"", name, "\"\nsummary = \"rechecks\"\ndevice = \"cpu\"\n",
             "provider = { only = \"external\" }\nassurance = \"checked\"\nvjp = \"torchlean-tape\"\n",
             "lowering = \"coalesced\"\nmodules = [\"", module, "\"]\n\n[availability]\ndevices = [\"cpu\"]\n",
             "providers = [\"external\"]\n");
}

constexpr std::string_view kFreivalds = R"({ kind = "checker", name = "freivalds.matmul", coverage = "full" })";
constexpr std::string_view kFreivaldsVjp =
    R"({ kind = "checker", name = "freivalds.matmul.vjp", coverage = "full" })";

struct Fixture {
  testing::ScratchTree tree{"recheck"};
  Workspace workspace;
  CheckerRegistry checkers;

  Fixture() {
    tree.write("catalogs/checked.toml", module_text("checked", kFreivalds));
    tree.write("catalogs/plain.toml",
               module_text("plain", R"({ kind = "test-suite", name = "inline.values" })"));
    tree.write("catalogs/misspelt.toml",
               module_text("misspelt", R"({ kind = "checker", name = "freivalds.matmull", coverage = "full" })"));
    tree.write("catalogs/wrongop.toml",
               module_text("wrongop", R"({ kind = "checker", name = "freivalds.linear", coverage = "full" })"));
    tree.write("catalogs/wrongcoverage.toml",
               module_text("wrongcoverage", R"({ kind = "checker", name = "freivalds.matmul", coverage = "sampled" })"));
    // matmul computes its own backward, and both its value and its VJP are checked per call.
    std::string vjp_text = module_text("vjpchecked", kFreivalds);
    const std::string matmul_entry = "name = \"vjpchecked.matmul\"\nop = \"matmul\"\n";
    vjp_text.replace(vjp_text.find(matmul_entry), matmul_entry.size(),
                     matmul_entry + "vjp = \"backend-vjp\"\n" + str("contracts.vjp = { claim = \"vjp-refinement\", ",
                                                                   "mode = \"backend-vjp\", evidence = ",
                                                                   kFreivaldsVjp, " }\n"));
    tree.write("catalogs/vjpchecked.toml", vjp_text);
    for (std::string_view m : {"checked", "plain", "misspelt", "wrongop", "wrongcoverage", "vjpchecked"}) {
      tree.write(str("profiles/", m, ".toml"), profile_text(m, m));
    }
    workspace = tree.load();
    REQUIRE_FALSE(has_errors(workspace.diagnostics));
    REQUIRE(register_standard_checkers(checkers));
  }
};

SessionOptions options_for(std::string profile, std::optional<RecheckPolicy> recheck = std::nullopt) {
  SessionOptions options;
  options.profile = std::move(profile);
  options.recheck = recheck;
  return options;
}

Tensor matrix(std::int64_t rows, std::int64_t cols, double offset) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < rows * cols; ++i) v.push_back(offset + 0.25 * static_cast<double>((i * 7) % 11) - 1.0);
  return Tensor::from_values(Shape::make({rows, cols}).value(), DType::F64, v).value();
}

/// Ten steps of gradient descent on |X·W - Y|², returning every loss.
std::vector<double> train(Session& session) {
  const Tensor x = matrix(5, 4, 0.0);
  const Tensor y = matrix(5, 3, 0.5);
  std::vector<double> w = matrix(4, 3, -0.25).to_vector();
  std::vector<double> losses;
  for (int step = 0; step < 10; ++step) {
    Var wv = session.parameter(Tensor::from_values(Shape::make({4, 3}).value(), DType::F64, w).value());
    Var pred = session.call(Op::Matmul, {session.constant(x), wv}).value();
    Var diff = session.call(Op::Sub, {pred, session.constant(y)}).value();
    Var loss = session.call(Op::ReduceSum, {session.call(Op::Mul, {diff, diff}).value()}).value();
    losses.push_back(loss.value().at(0));
    auto grads = session.backward(loss);
    REQUIRE_MESSAGE(grads, (grads ? std::string() : grads.error().message));
    const std::vector<double> g = grads->of(wv).to_vector();
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= 0.01 * g[i];
    session.clear_tape();
  }
  return losses;
}

const RecheckUse& matmul_recheck(const Session& session) {
  static std::vector<CapsuleUse> used;
  used = session.capsules_used();
  auto it = std::find_if(used.begin(), used.end(), [](const CapsuleUse& u) { return u.op == Op::Matmul; });
  REQUIRE(it != used.end());
  REQUIRE(it->rechecks.size() == 1);
  return it->rechecks[0];
}

}  // namespace

TEST_SUITE("recheck") {
  TEST_CASE("a checked capsule is rechecked on every call and the report shows it") {
    Fixture f;
    const HandlerRegistry handlers = external_handlers();
    auto session = Session::open(f.workspace, handlers, f.checkers, options_for("checked"));
    REQUIRE_MESSAGE(session, (session ? std::string() : session.error().message));
    train(*session);
    const RecheckUse& r = matmul_recheck(*session);
    CHECK(r.checker == "freivalds.matmul");
    CHECK(r.obligation == Obligation::Value);
    // 10 forward products and 2 per backward (dX is not needed, so 10 dW products: the VJP rule
    // dispatches matmul through the session, and those are value calls of the capsule too).
    CHECK(r.calls >= 10);
    CHECK(r.run == r.calls);
    CHECK(r.passed == r.run);
    const std::vector<CapsuleUse> used = session->capsules_used();
    const std::string text = capsules_used_text(used);
    CHECK(has(text, str("    recheck value by freivalds.matmul (full, every call): ", r.calls, " of ", r.calls,
                        " calls checked, ", r.calls, " passed\n")));
    JsonWriter json;
    write_capsules_used_json(json, used);
    CHECK(has(json.str(), str(R"("rechecks":[{"obligation":"value","checker":"freivalds.matmul","coverage":"full",)",
                              R"("policy":{"every":1},"calls":)", r.calls, R"(,"checks_run":)", r.calls,
                              R"(,"checks_passed":)", r.calls, "}]")));
  }

  TEST_CASE("every N checks calls 0, N, 2N, ...") {
    Fixture f;
    const HandlerRegistry handlers = external_handlers();
    RecheckPolicy every3;
    every3.every = 3;
    auto session = Session::open(f.workspace, handlers, f.checkers, options_for("checked", every3));
    REQUIRE(session);
    train(*session);
    const RecheckUse& r = matmul_recheck(*session);
    CHECK(r.run == (r.calls + 2) / 3);
    CHECK(has(capsules_used_text(session->capsules_used()), "(full, every 3 calls): "));
  }

  TEST_CASE("a sampled policy checks a strict, reproducible subset of the calls") {
    Fixture f;
    const HandlerRegistry handlers = external_handlers();
    auto checks_run = [&](std::uint64_t seed) {
      RecheckPolicy sample;
      sample.kind = RecheckPolicy::Kind::Sample;
      sample.sample = 0.5;
      sample.seed = seed;
      auto session = Session::open(f.workspace, handlers, f.checkers, options_for("checked", sample));
      REQUIRE(session);
      train(*session);
      const RecheckUse& r = matmul_recheck(*session);
      CHECK(r.passed == r.run);
      CHECK(has(capsules_used_text(session->capsules_used()), str("(full, sample p=0.5 seed=", seed, "): ")));
      return std::pair{r.run, r.calls};
    };
    const auto [first, calls] = checks_run(7);
    CHECK(checks_run(7).first == first);
    CHECK(first > 0);
    CHECK(first < calls);
  }

  TEST_CASE("losses are identical with and without rechecks") {
    Fixture f;
    const HandlerRegistry handlers = external_handlers();
    auto checked = Session::open(f.workspace, handlers, f.checkers, options_for("checked"));
    auto plain = Session::open(f.workspace, handlers, options_for("plain"));
    REQUIRE(checked);
    REQUIRE(plain);
    const std::vector<double> with = train(*checked);
    const std::vector<double> without = train(*plain);
    CHECK(matmul_recheck(*checked).run > 0);
    REQUIRE(with.size() == without.size());
    for (std::size_t i = 0; i < with.size(); ++i) CHECK(with[i] == without[i]);
    CHECK(with.back() < with.front());  // it trains
  }

  TEST_CASE("a wrong product stops the run with the violation and writes a reproduction bundle") {
    Fixture f;
    testing::ScratchTree out("recheck-bundle");
    const HandlerRegistry handlers = external_handlers(corrupt_matmul);
    SessionOptions options = options_for("checked");
    options.repro_dir = out.root();
    const EnvironmentFingerprint fingerprint = testing::fixed_fingerprint();
    options.fingerprint = &fingerprint;
    auto session = Session::open(f.workspace, handlers, f.checkers, options);
    REQUIRE(session);
    const Var a = session->constant(matrix(3, 4, 0.0));
    const Var b = session->constant(matrix(4, 2, 1.0));
    auto result = session->call(Op::Matmul, {a, b});
    REQUIRE_FALSE(result);
    CHECK(result.error().code == RuntimeCode::CheckFailed);
    const std::string& message = result.error().message;
    CHECK(has(message, "recheck failed: capsule `checked.matmul` (op `matmul`, device `cpu`), value call 0, checker "
                       "`freivalds.matmul`: "));
    CHECK(has(message, " exceeds its bound "));
    CHECK(has(message, "nothing is recomputed with another provider"));
    const std::filesystem::path bundle = out.root() / "capsule-recheck-checked.matmul-value-call0";
    CHECK(has(message, str("reproduction bundle: ", bundle.string())));
    REQUIRE(std::filesystem::is_directory(bundle));
    std::ifstream manifest_file(bundle / "manifest.json");
    std::stringstream manifest;
    manifest << manifest_file.rdbuf();
    const std::string m = manifest.str();
    INFO(m);
    CHECK(has(m, R"("format":"capsule-recheck-bundle/1")"));
    CHECK(has(m, R"("capsule":"checked.matmul","op":"matmul","provider":"external","device":"cpu")"));
    CHECK(has(m, R"("call_index":0)"));
    CHECK(has(m, R"("checker":{"name":"freivalds.matmul","coverage":"full")"));
    CHECK(has(m, R"("verdict":{"passed":false,)"));
    CHECK(has(m, R"("environment":{"sha256":)"));
    CHECK(has(m, R"({"role":"input0","file":"input0.bin","dtype":"float64","shape":[3,4],"byte_order":"little"})"));
    CHECK(has(m, R"({"role":"output","file":"output.bin","dtype":"float64","shape":[3,2],"byte_order":"little"})"));
    CHECK(std::filesystem::file_size(bundle / "input0.bin") == 3 * 4 * 8);
    CHECK(std::filesystem::file_size(bundle / "input1.bin") == 4 * 2 * 8);
    CHECK(std::filesystem::file_size(bundle / "output.bin") == 3 * 2 * 8);
    // The stored output is the corrupted one the checker saw.
    std::ifstream raw(bundle / "output.bin", std::ios::binary);
    std::vector<double> stored(6);
    raw.read(reinterpret_cast<char*>(stored.data()), 6 * 8);
    const std::vector<double> right = reference(Op::Matmul).forward(std::vector<Tensor>{a.value(), b.value()}, {})
                                          .value()
                                          .to_vector();
    CHECK(stored[2] == right[2] + 1.0);

    // A second failure never reuses or overwrites the first bundle: it gets a new directory.
    auto again = Session::open(f.workspace, handlers, f.checkers, options);
    REQUIRE(again);
    REQUIRE_FALSE(again->call(Op::Matmul, {a, b}));
    CHECK(std::filesystem::is_directory(out.root() / "capsule-recheck-checked.matmul-value-call0-1"));
  }

  TEST_CASE("a bundle never follows a link planted at its name") {
    Fixture f;
    testing::ScratchTree out("recheck-link");
    testing::ScratchTree target("recheck-link-target");
    std::filesystem::create_directory_symlink(target.root(), out.root() / "capsule-recheck-checked.matmul-value-call0");
    const HandlerRegistry handlers = external_handlers(corrupt_matmul);
    SessionOptions options = options_for("checked");
    options.repro_dir = out.root();
    auto session = Session::open(f.workspace, handlers, f.checkers, options);
    REQUIRE(session);
    auto result = session->call(Op::Matmul, {session->constant(matrix(3, 4, 0.0)), session->constant(matrix(4, 2, 1.0))});
    REQUIRE_FALSE(result);
    CHECK(has(result.error().message, "capsule-recheck-checked.matmul-value-call0-1"));
    CHECK_FALSE(std::filesystem::exists(target.root() / "manifest.json"));
    CHECK(std::filesystem::exists(out.root() / "capsule-recheck-checked.matmul-value-call0-1" / "manifest.json"));
  }

  TEST_CASE("checker evidence that binds no registered checker fails before anything runs") {
    Fixture f;
    const HandlerRegistry handlers = external_handlers();
    auto open = [&](std::string profile) {
      SessionOptions options = options_for(std::move(profile));
      options.preselect = {Op::Matmul};
      return Session::open(f.workspace, handlers, f.checkers, options);
    };
    auto misspelt = open("misspelt");
    REQUIRE_FALSE(misspelt);
    CHECK(misspelt.error().code == RuntimeCode::BindingRejected);
    CHECK(misspelt.error().message ==
          "torch: invalid checker binding: capsule `misspelt.matmul` (op `matmul`, device `cpu`): its value evidence "
          "names checker `freivalds.matmull`, which is not registered; did you mean `freivalds.matmul`?");
    auto wrong_op = open("wrongop");
    REQUIRE_FALSE(wrong_op);
    CHECK(has(wrong_op.error().message, "names checker `freivalds.linear` with coverage `full`, registered at "));
    CHECK(has(wrong_op.error().message, " for op `linear` on device `cpu` (value) with coverage `full`: op: the capsule "
                                        "is for `matmul`, the checker checks `linear`"));
    auto wrong_coverage = open("wrongcoverage");
    REQUIRE_FALSE(wrong_coverage);
    CHECK(has(wrong_coverage.error().message,
              "coverage: the catalog claims `sampled`, the registered checker's is `full`"));
    // Without a checker registry the capsule is refused too: a check is never skipped.
    SessionOptions options = options_for("checked");
    options.preselect = {Op::Matmul};
    auto no_registry = Session::open(f.workspace, handlers, options);
    REQUIRE_FALSE(no_registry);
    CHECK(has(no_registry.error().message, "the session was opened without a checker registry"));
  }
}

TEST_SUITE("recheck") {
  TEST_CASE("a VJP checked per call: every backward of the capsule is rechecked and passes, shown in the report") {
    Fixture f;
    const HandlerRegistry handlers = backend_vjp_handlers();
    auto session = Session::open(f.workspace, handlers, f.checkers, options_for("vjpchecked"));
    REQUIRE_MESSAGE(session, (session ? std::string() : session.error().message));
    const std::vector<double> losses = train(*session);
    CHECK(losses.back() < losses.front());
    const std::vector<CapsuleUse> used = session->capsules_used();
    auto it = std::find_if(used.begin(), used.end(), [](const CapsuleUse& u) { return u.op == Op::Matmul; });
    REQUIRE(it != used.end());
    REQUIRE(it->rechecks.size() == 2);
    const RecheckUse& value = it->rechecks[0];
    const RecheckUse& vjp = it->rechecks[1];
    CHECK(value.obligation == Obligation::Value);
    CHECK(vjp.obligation == Obligation::Vjp);
    CHECK(vjp.checker == "freivalds.matmul.vjp");
    // One backward per step through the one taped matmul; its own backward dispatches no matmul.
    CHECK(vjp.calls == 10);
    CHECK(vjp.run == 10);
    CHECK(vjp.passed == 10);
    CHECK(value.calls == 10);
    const std::string text = capsules_used_text(used);
    CHECK(has(text, "    recheck vjp by freivalds.matmul.vjp (full, every call): 10 of 10 calls checked, 10 passed\n"));
    JsonWriter json;
    write_capsules_used_json(json, used);
    CHECK(has(json.str(), R"({"obligation":"vjp","checker":"freivalds.matmul.vjp","coverage":"full","policy":{"every":1},)"
                          R"("calls":10,"checks_run":10,"checks_passed":10})"));
  }

  TEST_CASE("a wrong gradient is caught by the VJP recheck: check-failed, and a bundle with the gradients") {
    Fixture f;
    testing::ScratchTree out("recheck-vjp-bundle");
    const HandlerRegistry handlers = backend_vjp_handlers(corrupt_matmul_backward);
    SessionOptions options = options_for("vjpchecked");
    options.repro_dir = out.root();
    auto session = Session::open(f.workspace, handlers, f.checkers, options);
    REQUIRE(session);
    const Var x = session->constant(matrix(3, 4, 0.0));
    const Var w = session->parameter(matrix(4, 2, 1.0));
    auto product = session->call(Op::Matmul, {x, w});
    REQUIRE(product);  // the forward is right: its value recheck passes
    auto loss = session->call(Op::ReduceSum, {*product});
    REQUIRE(loss);
    auto grads = session->backward(*loss);
    REQUIRE_FALSE(grads);
    CHECK(grads.error().code == RuntimeCode::CheckFailed);
    const std::string& message = grads.error().message;
    INFO(message);
    CHECK(has(message, "recheck failed: capsule `vjpchecked.matmul` (op `matmul`, device `cpu`), vjp call 0, checker "
                       "`freivalds.matmul.vjp`: "));
    CHECK(has(message, " exceeds its bound "));
    const std::filesystem::path bundle = out.root() / "capsule-recheck-vjpchecked.matmul-vjp-call0";
    CHECK(has(message, str("reproduction bundle: ", bundle.string())));
    REQUIRE(std::filesystem::is_directory(bundle));
    const std::string m = testing::read_text(bundle / "manifest.json");
    INFO(m);
    CHECK(has(m, R"("obligation":"vjp")"));
    CHECK(has(m, R"("checker":{"name":"freivalds.matmul.vjp","coverage":"full")"));
    CHECK(has(m, R"("verdict":{"passed":false,)"));
    CHECK(has(m, R"({"role":"output_gradient","file":"output_gradient.bin","dtype":"float64","shape":[3,2],)"));
    CHECK(has(m, R"({"role":"input_gradient1","file":"input_gradient1.bin","dtype":"float64","shape":[4,2],)"));
    CHECK(std::filesystem::file_size(bundle / "input_gradient1.bin") == 4 * 2 * 8);
    // The stored gradient is the wrong one the checker saw.
    std::ifstream raw(bundle / "input_gradient1.bin", std::ios::binary);
    std::vector<double> stored(8);
    raw.read(reinterpret_cast<char*>(stored.data()), 8 * 8);
    const Tensor ones = Tensor::full(Shape::make({3, 2}).value(), DType::F64, 1.0).value();
    const Tensor right_out = reference(Op::Matmul).forward(std::vector<Tensor>{x.value(), w.value()}, {}).value();
    const std::vector<double> right =
        reference(Op::Matmul).backward(std::vector<Tensor>{x.value(), w.value()}, right_out, ones, {}).value()[1].to_vector();
    CHECK(stored[0] == right[0] + 0.5);
    CHECK(stored[2] == right[2]);
  }

  TEST_CASE("capsule run refuses a --repro-dir that is not an existing directory") {
    const testing::CliRun run = testing::run_shipped_cli(
        {"run", "mlp_regression", "--profile", "checked_cpu", "--repro-dir", "/nonexistent/capsule-repro"});
    CHECK(run.status == 2);
    CHECK(has(run.err, "--repro-dir: `/nonexistent/capsule-repro` is not an existing directory"));
  }
}
