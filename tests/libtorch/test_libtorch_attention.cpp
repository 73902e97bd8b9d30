// SPDX-License-Identifier: Apache-2.0
// Parity of the LibTorch attention family (hard_masked_softmax, scaled_matmul, softmax_matmul,
// scaled_dot_product_attention) with the reference, forward and local adjoint, under the bounds
// of docs/libtorch.md ("Parity bounds", attention rows): random inputs and masks, fully blocked
// rows, NaN and infinities at blocked and allowed positions, size-0 and size-1 dims, causal and
// batched masks. These cases add to the suites libtorch.values and libtorch.vjps (their coverage
// declarations add up with test_libtorch.cpp's). Also: each call converts exactly the masks it is
// given (the counted kBool copies of the boundary), and the inputs stay bitwise unchanged.
#if defined(CAPSULE_HAVE_LIBTORCH)

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention_table.hpp"
#include "capsule/handlers/libtorch.hpp"
#include "capsule/runtime/session.hpp"
#include "capsule/text.hpp"
#include "suite_coverage.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const HandlerRegistry& attention_libtorch_handlers() {
  static const HandlerRegistry registry = [] {
    set_libtorch_threads(1);
    HandlerRegistry r;
    auto status = register_libtorch_handlers(r);
    REQUIRE_MESSAGE(status.has_value(), (status ? std::string() : status.error().message));
    return r;
  }();
  return registry;
}

const HandlerSpec& lib(Op op) {
  const RegisteredHandler* h = attention_libtorch_handlers().find(op, Provider::Libtorch, Device::Cpu);
  REQUIRE_MESSAGE(h != nullptr, "no LibTorch handler for " << to_string(op));
  testing::record_exercised(op, Provider::Libtorch, Device::Cpu);
  return h->spec;
}

const HandlerSpec& ref(Op op) {
  const RegisteredHandler* h = testing::reference_handlers().find(op, Provider::Reference, Device::Cpu);
  REQUIRE_MESSAGE(h != nullptr, "no reference handler for " << to_string(op));
  return h->spec;
}

using namespace libtorch_parity;  // the attention family's cases, bounds and comparisons
using Case = AttentionCase;
using Bounds = AttentionBounds;

const testing::SuiteCoverage kAttentionValues{"libtorch.values", Obligation::Value, Provider::Libtorch, Device::Cpu,
                                              attention_ops};
const testing::SuiteCoverage kAttentionVjps{"libtorch.vjps", Obligation::Vjp, Provider::Libtorch, Device::Cpu,
                                            attention_ops};

void run_cases(bool special) {
  std::mt19937_64 rng(special ? 9100 : 9000);
  for (const DType t : {DType::F32, DType::F64}) {
    for (const Case& c : special ? attention_special_cases(t) : attention_random_cases(t, rng)) {
      check_attention_case(lib(c.op), ref(c.op), c, rng);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// External autograd (libtorch.autograd_values, libtorch.autograd_vjps): the same cases through
// each handler's forward_autograd and its boundary's one VJP, under the same bounds. The one
// documented difference (docs/libtorch.md, "Differences from the reference under autograd"): with
// a finite v, a non-finite output gradient at a query that blocks a key reaches that key's dv
// through Wᵀ·g as 0·NaN = NaN, where the reference adds no term for a blocked edge.

/// The LibTorch handlers without doctest assertions (the coverage declarations run outside any
/// test case, under --evidence-manifest, where an assertion cannot report).
const HandlerRegistry& declared_attention_handlers() {
  static const HandlerRegistry registry = [] {
    HandlerRegistry r;
    (void)register_libtorch_handlers(r);  // a failure leaves it empty: the suites then declare nothing
    return r;
  }();
  return registry;
}

/// The attention-family ops whose LibTorch handler opens an autograd region.
std::vector<Op> attention_region_ops() {
  std::vector<Op> ops;
  for (const Op op : attention_ops()) {
    const RegisteredHandler* h = declared_attention_handlers().find(op, Provider::Libtorch, Device::Cpu);
    if (h != nullptr && h->spec.forward_autograd != nullptr) ops.push_back(op);
  }
  return ops;
}

const testing::SuiteCoverage kAttentionAutogradValues{"libtorch.autograd_values", Obligation::Value, Provider::Libtorch,
                                                      Device::Cpu, attention_region_ops};
const testing::SuiteCoverage kAttentionAutogradVjps{"libtorch.autograd_vjps", Obligation::Vjp, Provider::Libtorch,
                                                    Device::Cpu, attention_region_ops};

bool has_region(Op op) {
  const std::vector<Op> ops = attention_region_ops();
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

std::vector<bool> engine_needs(Op op, std::size_t n) {
  std::vector<bool> needs(n);
  for (std::size_t i = 0; i < n; ++i) needs[i] = input_takes_gradient(op, i);
  return needs;
}

/// One case through the autograd region: both sides fail or succeed together; the output and each
/// gradient within the case's bounds; inputs, output and output gradient bitwise unchanged; the
/// mask never takes a gradient; a second VJP is refused. Returns the region's gradients (dv is not
/// compared when `dv_differs`: the documented difference, pinned by the caller).
std::vector<Tensor> check_region_case(const Case& c, std::mt19937_64& rng, bool dv_differs = false) {
  CAPTURE(c.name);
  CAPTURE(to_string(c.inputs[0].dtype()));
  std::vector<std::vector<unsigned char>> before;
  for (const Tensor& t : c.inputs) before.push_back(bytes_of(t));
  const RuntimeResult<Tensor> r = ref(c.op).forward(c.inputs, c.attrs);
  auto region = lib(c.op).forward_autograd(c.inputs, c.attrs, engine_needs(c.op, c.inputs.size()));
  REQUIRE_MESSAGE(r.has_value() == region.has_value(),
                  "reference " << (r ? "succeeds" : r.error().message) << "; libtorch region "
                               << (region ? "succeeds" : region.error().message));
  if (!r) {
    CHECK(region.error().code == r.error().code);
    return {};
  }
  REQUIRE(region->boundary != nullptr);
  for (const Tensor& t : c.inputs) CHECK_FALSE(region->output.shares_storage_with(t));
  const Tensor grad = c.grad.defined() ? c.grad : random_tensor(r->shape().to_vector(), r->dtype(), rng);
  const Bounds b = c.bounds(c.inputs, grad, c.attrs);
  const std::string miss = compare_absolute(region->output, *r, b.forward);
  CHECK_MESSAGE(miss.empty(), "region forward: " << miss);

  const std::vector<unsigned char> out_before = bytes_of(region->output);
  const std::vector<unsigned char> grad_before = bytes_of(grad);
  auto lg = region->boundary->vjp(grad);
  REQUIRE_MESSAGE(lg.has_value(), lg.error().message);
  auto again = region->boundary->vjp(grad);
  REQUIRE_FALSE(again.has_value());
  CHECK(again.error().code == RuntimeCode::GradientUnavailable);
  for (std::size_t i = 0; i < c.inputs.size(); ++i) CHECK_MESSAGE(bytes_of(c.inputs[i]) == before[i], "input " << i);
  CHECK(bytes_of(region->output) == out_before);
  CHECK(bytes_of(grad) == grad_before);
  const auto rg = ref(c.op).backward(c.inputs, *r, grad, c.attrs);
  REQUIRE(rg.has_value());
  REQUIRE(lg->size() == c.inputs.size());
  std::vector<Tensor> got = *lg;
  for (std::size_t i = 0; i < rg->size(); ++i) {
    if (!input_takes_gradient(c.op, i)) {
      CHECK_MESSAGE(!got[i].defined(), "the mask took a gradient");
      continue;
    }
    // An input autograd did not reach has no gradient at the boundary; the engine makes it zeros.
    if (!got[i].defined() && (*rg)[i].defined()) got[i] = Tensor::zeros(c.inputs[i].shape(), c.inputs[i].dtype()).value();
    for (const Tensor& t : c.inputs) CHECK_FALSE(got[i].shares_storage_with(t));
    CHECK_FALSE(got[i].shares_storage_with(grad));
    if (dv_differs && i == 2) continue;
    const std::string gmiss = compare_absolute(got[i], (*rg)[i], i < b.backward.size() ? b.backward[i] : 0.0);
    CHECK_MESSAGE(gmiss.empty(), "region gradient " << i << ": " << gmiss);
  }
  return got;
}

void run_region_cases(bool special) {
  std::mt19937_64 rng(special ? 9300 : 9200);
  for (const DType t : {DType::F32, DType::F64}) {
    for (const Case& c : special ? attention_special_cases(t) : attention_random_cases(t, rng)) {
      if (has_region(c.op)) (void)check_region_case(c, rng);
    }
  }
}

}  // namespace

TEST_SUITE("libtorch.autograd_values") {
  TEST_CASE("attention-family autograd regions match the reference on random inputs, masks and edge shapes") {
    REQUIRE(has_region(Op::HardMaskedSoftmax));
    REQUIRE(has_region(Op::SoftmaxMatmul));
    REQUIRE(has_region(Op::ScaledDotProductAttention));
    run_region_cases(false);
  }
  TEST_CASE("attention-family autograd regions keep TorchLean's mask semantics on special values") {
    run_region_cases(true);
  }
}

// As for the plain suites, each region case runs forward and VJP together, so both suites run the
// whole table; a forward miss and a VJP miss are reported apart.
TEST_SUITE("libtorch.autograd_vjps") {
  TEST_CASE("attention-family autograd VJPs match the reference (random, masks, edge shapes)") { run_region_cases(false); }
  TEST_CASE("attention-family autograd VJPs keep TorchLean's mask semantics on special values") { run_region_cases(true); }
  TEST_CASE("attention-family autograd VJPs: blocked entries take exactly 0, blocked rows give zeros") {
    std::mt19937_64 rng(9400);
    for (const DType t : {DType::F32, DType::F64}) {
      CAPTURE(to_string(t));
      const std::vector<Case> cases = attention_special_cases(t);
      const auto named = [&](const std::string& name) -> const Case& {
        const auto found = std::find_if(cases.begin(), cases.end(), [&](const Case& x) { return x.name == name; });
        REQUIRE(found != cases.end());
        return *found;
      };
      // hard_masked_softmax: NaN and ±inf gradients at blocked entries add no term to their lane
      // (autograd's softmax adjoint would read them without the where), and every blocked entry
      // takes exactly 0.
      const Case& lanes = named("hard_masked_softmax special lanes");
      const std::vector<Tensor> dx = check_region_case(lanes, rng);
      REQUIRE(dx.size() == 2);
      std::vector<bool> blocked;
      for (const double m : lanes.inputs[1].to_vector()) blocked.push_back(m == 0.0);
      CHECK(zero_at(dx[0], blocked));
      // SDPA: the fully blocked query (row 1) is exactly zero in the output and in dq; NaN and
      // +inf values at the blocked keys 1 and 3 leave the output and dq, dk finite, and dv at
      // those keys is Wᵀ·g over the allowed edges (0 here: no query allows them), not NaN.
      const Case& nan_v = named("sdpa blocked row and NaN/inf v at blocked keys");
      auto region = lib(nan_v.op).forward_autograd(nan_v.inputs, nan_v.attrs, {true, true, true, false});
      REQUIRE(region.has_value());
      CHECK(zero_at(region->output, {false, false, true, true, false, false}));
      for (const double y : region->output.to_vector()) CHECK(std::isfinite(y));
      const Tensor ones = Tensor::full(region->output.shape(), t, 1.0).value();
      const auto grads = region->boundary->vjp(ones).value();
      REQUIRE(grads.size() == 4);
      CHECK(zero_at(grads[0], {false, false, true, true, false, false}));
      for (std::size_t i = 0; i < 3; ++i) {
        for (const double x : grads[i].to_vector()) CHECK_MESSAGE(std::isfinite(x), "gradient " << i);
      }
      CHECK(zero_at(grads[2], {false, false, true, true, false, false, true, true}));
      CHECK_FALSE(grads[3].defined());
      // With a non-finite v the region forms W·v edge by edge, so a NaN/+inf gradient at the fully
      // blocked query adds no term to any dv either (compared with the reference in full).
      (void)check_region_case(named("sdpa NaN/inf g at a fully blocked query"), rng);
      // The documented difference: with a finite v (one matmul), that gradient reaches every key's
      // dv as 0·NaN under autograd (Wᵀ·g), where the reference's dv stays finite; dq and dk still
      // match (check_region_case compared them).
      Case bad_g = named("sdpa NaN/inf g at a fully blocked query");
      bad_g.inputs[2] = named("sdpa blocked row").inputs[2];
      const std::vector<Tensor> pinned = check_region_case(bad_g, rng, true);
      REQUIRE(pinned.size() == 4);
      for (const double x : pinned[2].to_vector()) CHECK(std::isnan(x));
      const auto ref_g = ref(bad_g.op).backward(bad_g.inputs, ref(bad_g.op).forward(bad_g.inputs, bad_g.attrs).value(),
                                                bad_g.grad, bad_g.attrs).value();
      for (const double x : ref_g[2].to_vector()) CHECK(std::isfinite(x));
    }
  }
}

TEST_SUITE("libtorch.autograd_boundary") {
  TEST_CASE("libtorch.sdpa_autograd_cpu binds and backpropagates through its autograd region with the reference's gradients") {
    // Before the SDPA handler opened an autograd region, binding this capsule was refused at
    // session open (an external-autograd capsule needs a forward_autograd).
    testing::ScratchTree tree("sdpa-autograd");
    tree.write("profiles/sdpa_autograd_test.toml",
               "schema = 1\nname = \"sdpa_autograd_test\"\nsummary = \"the SDPA bridge under LibTorch autograd\"\n"
               "device = \"cpu\"\nprovider = { only = \"libtorch\" }\nassurance = \"external\"\n"
               "vjp = \"external-autograd\"\nlowering = \"coalesced\"\nmodules = [\"libtorch-cpu\"]\n\n"
               "[availability]\ndevices = [\"cpu\"]\nproviders = [\"libtorch\"]\n");
    const Workspace workspace = tree.load();
    REQUIRE_MESSAGE(!has_errors(workspace.diagnostics), render(workspace.diagnostics));
    SessionOptions options;
    options.profile = "sdpa_autograd_test";
    options.preselect = {Op::ScaledDotProductAttention};
    auto session = Session::open(workspace, attention_libtorch_handlers(), options);
    REQUIRE_MESSAGE(session.has_value(), (session ? std::string() : session.error().message));
    const ExecutableKernel* kernel = session->select(Op::ScaledDotProductAttention).value();
    CHECK(kernel->capsule().name == "libtorch.sdpa_autograd_cpu");
    CHECK(kernel->capsule().vjp == VjpMode::ExternalAutograd);

    for (const DType t : {DType::F32, DType::F64}) {
      CAPTURE(to_string(t));
      // The special case with a fully blocked query and NaN/+inf values at blocked keys.
      const std::vector<Case> cases = attention_special_cases(t);
      const auto found = std::find_if(cases.begin(), cases.end(), [](const Case& x) {
        return x.name == "sdpa blocked row and NaN/inf v at blocked keys";
      });
      REQUIRE(found != cases.end());
      const Case& c = *found;
      const std::int64_t live = libtorch_live_autograd_regions();
      const Var q = session->parameter(c.inputs[0]);
      const Var k = session->parameter(c.inputs[1]);
      const Var v = session->parameter(c.inputs[2]);
      const Var mask = session->constant(c.inputs[3]);
      const Var out = session->call(Op::ScaledDotProductAttention, {q, k, v, mask}, c.attrs).value();
      CHECK(libtorch_live_autograd_regions() == live + 1);
      auto grads = session->backward(out);  // seeded with ones
      REQUIRE_MESSAGE(grads.has_value(), (grads ? std::string() : grads.error().message));
      CHECK(libtorch_live_autograd_regions() == live);

      const Tensor want_out = ref(c.op).forward(c.inputs, c.attrs).value();
      const Tensor ones = Tensor::full(want_out.shape(), t, 1.0).value();
      const auto want = ref(c.op).backward(c.inputs, want_out, ones, c.attrs).value();
      const Bounds b = c.bounds(c.inputs, ones, c.attrs);
      CHECK(compare_absolute(out.value(), want_out, b.forward).empty());
      const std::vector<Var> params{q, k, v};
      for (std::size_t i = 0; i < params.size(); ++i) {
        const std::string miss = compare_absolute(grads->of(params[i]), want[i], b.backward[i]);
        CHECK_MESSAGE(miss.empty(), "gradient " << i << ": " << miss);
      }
      session->clear_tape();
    }
  }

  TEST_CASE("the SDPA region refuses an edge-wise product above its limit instead of allocating it") {
    // batch·n·m·dv = 2048·2048·33 > 2^27 while every input stays small: a NaN in v and the causal
    // mask would need the edge-wise form; the region says so before allocating anything that large.
    const DType t = DType::F32;
    const Tensor q = Tensor::zeros(Shape::make({1, 2048, 1}).value(), t).value();
    const Tensor k = Tensor::zeros(Shape::make({1, 2048, 1}).value(), t).value();
    std::vector<double> values(2048 * 33, 0.5);
    values[7] = kNaN;
    const Tensor v = host_tensor({1, 2048, 33}, t, values);
    const std::int64_t live = libtorch_live_autograd_regions();
    const auto refused = lib(Op::ScaledDotProductAttention)
                             .forward_autograd(std::vector<Tensor>{q, k, v}, attention_attrs(0, true), {true, true, true});
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == RuntimeCode::InvalidArgument);
    CHECK(testing::has(refused.error().message, "above its limit of 134217728"));
    CHECK_FALSE(testing::has(refused.error().message, "\n"));
    CHECK(libtorch_live_autograd_regions() == live);
    // A finite v of the same shape takes one matmul and runs.
    const Tensor finite = Tensor::full(v.shape(), t, 0.5).value();
    const auto runs = lib(Op::ScaledDotProductAttention)
                          .forward_autograd(std::vector<Tensor>{q, k, finite}, attention_attrs(0, true), {true, true, true});
    CHECK(runs.has_value());
  }
}

TEST_SUITE("libtorch.boundary") {
  TEST_CASE("attention autograd regions convert the mask once per call and never track it") {
    std::mt19937_64 rng(78);
    const Tensor x = random_tensor({3, 4}, DType::F32, rng);
    const Tensor mask = random_mask({3, 4}, DType::F32, rng, 1);
    const auto delta = [](Op op, auto&& call) {
      const std::uint64_t before = libtorch_boundary_copies_of(op).conversions;
      call();
      return libtorch_boundary_copies_of(op).conversions - before;
    };
    const std::int64_t live = libtorch_live_autograd_regions();
    const std::vector<Tensor> masked{x, mask};
    // The engine's flags ask for a mask gradient here; the region still never tracks the mask.
    CHECK(delta(Op::HardMaskedSoftmax, [&] {
            auto region = lib(Op::HardMaskedSoftmax).forward_autograd(masked, axis_attrs(-1), {true, true});
            REQUIRE(region.has_value());
            const auto grads = region->boundary->vjp(region->output).value();
            CHECK(grads[0].defined());
            CHECK_FALSE(grads[1].defined());
          }) == 1);
    const Tensor q = random_tensor({1, 3, 2}, DType::F32, rng);
    const Tensor k = random_tensor({1, 4, 2}, DType::F32, rng);
    const Tensor v = random_tensor({1, 4, 2}, DType::F32, rng);
    const Op sdpa = Op::ScaledDotProductAttention;
    CHECK(delta(sdpa, [&] {
            auto region = lib(sdpa).forward_autograd(std::vector<Tensor>{q, k, v, mask}, {}, {true, true, true, true});
            REQUIRE(region.has_value());
            const auto grads = region->boundary->vjp(region->output).value();
            CHECK_FALSE(grads[3].defined());
          }) == 1);
    CHECK(delta(sdpa, [&] {
            auto region = lib(sdpa).forward_autograd(std::vector<Tensor>{q, k, v}, attention_attrs(0, true), {true, true, true});
            REQUIRE(region.has_value());
          }) == 0);  // causal: built, not converted
    CHECK(libtorch_live_autograd_regions() == live);
  }
}

// check_attention_case runs forward and adjoint together (the adjoint needs the forward's output), so each
// suite runs the whole table; a forward miss and an adjoint miss are reported apart.
TEST_SUITE("libtorch.values") {
  TEST_CASE("attention-family LibTorch handlers match the reference on random inputs, masks and edge shapes") {
    run_cases(false);
  }
  TEST_CASE("attention-family LibTorch handlers keep TorchLean's mask semantics on special values") { run_cases(true); }
}

TEST_SUITE("libtorch.vjps") {
  TEST_CASE("attention-family LibTorch adjoints match the reference (random, masks, edge shapes)") { run_cases(false); }
  TEST_CASE("attention-family LibTorch adjoints: blocked keys add no term, blocked rows give zeros") {
    run_cases(true);
    // The fully blocked query row is exactly zero in the output and in dq, on both sides.
    for (const DType t : {DType::F32, DType::F64}) {
      const std::vector<Case> cases = attention_special_cases(t);
      const auto found = std::find_if(cases.begin(), cases.end(), [](const Case& x) { return x.name == "sdpa blocked row"; });
      REQUIRE(found != cases.end());
      const Case& c = *found;
      const Tensor out = lib(c.op).forward(c.inputs, c.attrs).value();
      CHECK(zero_at(out, {false, false, true, true, false, false}));
      const Tensor g = Tensor::full(out.shape(), t, 1.0).value();
      const auto grads = lib(c.op).backward(c.inputs, out, g, c.attrs).value();
      CHECK(zero_at(grads[0], {false, false, true, true, false, false}));
      CHECK_FALSE(grads[3].defined());
    }
  }
}

TEST_SUITE("libtorch.boundary") {
  TEST_CASE("attention handlers convert exactly the masks they are given, one counted copy per call") {
    std::mt19937_64 rng(77);
    const Tensor x = random_tensor({3, 4}, DType::F32, rng);
    const Tensor mask = random_mask({3, 4}, DType::F32, rng, 1);
    auto delta = [](Op op, auto&& call) {
      const std::uint64_t before = libtorch_boundary_copies_of(op).conversions;
      call();
      return libtorch_boundary_copies_of(op).conversions - before;
    };
    const std::vector<Tensor> masked{x, mask};
    const Tensor y = lib(Op::HardMaskedSoftmax).forward(masked, axis_attrs(-1)).value();
    CHECK(delta(Op::HardMaskedSoftmax, [&] { (void)lib(Op::HardMaskedSoftmax).forward(masked, axis_attrs(-1)); }) == 1);
    CHECK(delta(Op::HardMaskedSoftmax, [&] { (void)lib(Op::HardMaskedSoftmax).backward(masked, y, y, axis_attrs(-1)); }) == 1);

    const Tensor q = random_tensor({1, 3, 2}, DType::F32, rng);
    const Tensor k = random_tensor({1, 4, 2}, DType::F32, rng);
    const Tensor v = random_tensor({1, 4, 2}, DType::F32, rng);
    const std::vector<Tensor> with_mask{q, k, v, mask};
    const std::vector<Tensor> without{q, k, v};
    const Tensor o = lib(Op::ScaledDotProductAttention).forward(with_mask, {}).value();
    const Op sdpa = Op::ScaledDotProductAttention;
    CHECK(delta(sdpa, [&] { (void)lib(sdpa).forward(with_mask, {}); }) == 1);
    CHECK(delta(sdpa, [&] { (void)lib(sdpa).backward(with_mask, o, o, {}); }) == 1);
    CHECK(delta(sdpa, [&] { (void)lib(sdpa).forward(without, {}); }) == 0);
    CHECK(delta(sdpa, [&] { (void)lib(sdpa).forward(without, attention_attrs(0, true)); }) == 0);  // causal: no input converted
    const std::vector<Tensor> ab{random_tensor({3, 4}, DType::F32, rng), random_tensor({4, 2}, DType::F32, rng)};
    CHECK(delta(Op::ScaledMatmul, [&] { (void)lib(Op::ScaledMatmul).forward(ab, {}); }) == 0);
    CHECK(delta(Op::SoftmaxMatmul, [&] { (void)lib(Op::SoftmaxMatmul).forward(ab, {}); }) == 0);
  }

  TEST_CASE("libtorch_attention_route names the path the SDPA handler takes, and ATen's backend where LibTorch can say") {
    std::mt19937_64 rng(78);
    const Tensor q = random_tensor({1, 3, 2}, DType::F32, rng);
    const Tensor k = random_tensor({1, 4, 2}, DType::F32, rng);
    const Tensor v = random_tensor({1, 4, 2}, DType::F32, rng);
    const Tensor mask = random_mask({3, 4}, DType::F32, rng, 1);
    auto route = [](const std::vector<Tensor>& inputs) {
      RuntimeResult<std::string> r = libtorch_attention_route(inputs, {});
      REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error().message));
      return *r;
    };
    // The backend part: LibTorch 1.13 has no _fused_sdp_choice and says so; 2.x names one of the
    // two kernels it has for CPU operands (its CPU flash kernel, or the composed math one).
    const bool torch1 = libtorch_version().rfind("1.", 0) == 0;
    auto names_backend = [&](const std::string& text) {
      if (torch1) return text.find("backend not reported: LibTorch 1.13 has no _fused_sdp_choice") != std::string::npos;
      return text.find(": backend math") != std::string::npos ||
             text.find(": backend flash_attention") != std::string::npos;
    };
    CHECK(libtorch_sdp_backend_name(2) == "efficient_attention");
    CHECK(libtorch_sdp_backend_name(7) == "number 7");
    const std::string plain = route({q, k, v});
    CHECK_MESSAGE(plain.rfind("ATen's fused SDPA, no mask: ", 0) == 0, plain);
    CHECK_MESSAGE(names_backend(plain), plain);
    const std::string masked = route({q, k, v, mask});
    CHECK_MESSAGE(masked.rfind("ATen's fused SDPA under the mask, fully blocked rows zeroed after: ", 0) == 0, masked);
    CHECK_MESSAGE(names_backend(masked), masked);

    // A NaN value with a mask: the composed sum that skips blocked edges (the value at a blocked
    // key must add nothing); the same value without a mask stays on the fused path.
    std::vector<double> nan_values = v.to_vector();
    nan_values[0] = kNaN;
    const Tensor v_nan = host_tensor({1, 4, 2}, DType::F32, nan_values);
    const std::string skipping = route({q, k, v_nan, mask});
    CHECK_MESSAGE(skipping.find("then a sum that skips blocked edges") != std::string::npos, skipping);
    const std::string unmasked_nan = route({q, k, v_nan});
    CHECK_MESSAGE(unmasked_nan.rfind("ATen's fused SDPA, no mask", 0) == 0, unmasked_nan);
    // Scores that could overflow float32: the composed product, never the fused kernel.
    const Tensor q_huge = host_tensor({1, 3, 2}, DType::F32, {1e30, 1e30, 1e30, 1e30, 1e30, 1e30});
    const Tensor k_huge = host_tensor({1, 4, 2}, DType::F32, {1e30, 1e30, 1e30, 1e30, 1e30, 1e30, 1e30, 1e30});
    const std::string product = route({q_huge, k_huge, v});
    CHECK_MESSAGE(product.find("then one product (a score could overflow") != std::string::npos, product);

    // It reads the mask as a call does: one counted conversion; and it refuses what the handler
    // refuses, with the handler's error.
    const std::uint64_t before = libtorch_boundary_copies_of(Op::ScaledDotProductAttention).conversions;
    (void)route({q, k, v, mask});
    CHECK(libtorch_boundary_copies_of(Op::ScaledDotProductAttention).conversions - before == 1);
    const std::vector<Tensor> wrong{q, k, v, random_mask({2, 4}, DType::F32, rng)};
    const RuntimeResult<std::string> refused = libtorch_attention_route(wrong, {});
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == RuntimeCode::ShapeMismatch);
    CHECK(lib(Op::ScaledDotProductAttention).forward(wrong, {}).error().message == refused.error().message);
  }
}

}  // namespace capsule

#endif  // CAPSULE_HAVE_LIBTORCH
