// SPDX-License-Identifier: Apache-2.0
// The checker registry and the standard checkers (docs/checkers.md): correct results from the
// reference handlers (and from other summation orders) are never rejected over many seeds; wrong
// results injected above each checker's stated floor are caught; NaN residuals fail.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "capsule/checkers/standard.hpp"
#include "capsule/runtime/checker.hpp"
#include "capsule/text.hpp"
#include "multi_dot.hpp"  // handlers/checkers/src: the kernels under the product check
#include "test_support.hpp"

using namespace capsule;

namespace {

const CheckerRegistry& standard_checkers() {
  static const CheckerRegistry registry = [] {
    CheckerRegistry r;
    auto status = register_standard_checkers(r);
    REQUIRE_MESSAGE(status.has_value(), (status ? std::string() : status.error().message));
    return r;
  }();
  return registry;
}

/// The reference handler's forward, fetched without the test support's tamper hook: these tests
/// need correct outputs whatever --tamper-op says.
Tensor reference(Op op, const std::vector<Tensor>& inputs, const OpAttrs& attrs = {}) {
  const RegisteredHandler* h = testing::reference_handlers().find(op, Provider::Reference, Device::Cpu);
  REQUIRE(h != nullptr);
  auto out = h->spec.forward(inputs, attrs);
  REQUIRE_MESSAGE(out.has_value(), (out ? std::string() : out.error().message));
  return *out;
}

Tensor random_tensor(std::vector<std::int64_t> dims, DType dtype, CheckerRng& rng, double lo = -1.0, double hi = 1.0) {
  auto shape = Shape::make(dims);
  REQUIRE(shape.has_value());
  std::vector<double> values(static_cast<std::size_t>(shape->numel()));
  for (double& v : values) v = lo + (hi - lo) * static_cast<double>(rng.next() >> 11) * 0x1p-53;
  auto t = Tensor::from_values(*shape, dtype, values);
  REQUIRE(t.has_value());
  return *t;
}

Tensor with_values(const Tensor& like, const std::vector<double>& values) {
  auto t = Tensor::from_values(like.shape(), like.dtype(), values);
  REQUIRE(t.has_value());
  return *t;
}

CheckVerdict check(std::string_view name, Op op, const std::vector<Tensor>& inputs, const Tensor& output,
                   const OpAttrs& attrs = {}, std::uint64_t seed = 1) {
  const RegisteredChecker* checker = standard_checkers().find(name);
  REQUIRE_MESSAGE(checker != nullptr, "no checker " << name);
  CheckerRng rng(checker_stream_seed(seed, "test", 0));
  CheckCall call{op, inputs, &output, &attrs, nullptr, {}};
  auto verdict = run_checker(*checker, call, rng);
  REQUIRE_MESSAGE(verdict.has_value(), (verdict ? std::string() : verdict.error().message));
  return *verdict;
}

/// The reference handler's local adjoint: one gradient per input.
std::vector<Tensor> reference_vjp(Op op, const std::vector<Tensor>& inputs, const Tensor& output, const Tensor& grad,
                                  const OpAttrs& attrs = {}) {
  const RegisteredHandler* h = testing::reference_handlers().find(op, Provider::Reference, Device::Cpu);
  REQUIRE(h != nullptr);
  REQUIRE((h->spec.backward != nullptr));
  auto grads = h->spec.backward(inputs, output, grad, attrs);
  REQUIRE_MESSAGE(grads.has_value(), (grads ? std::string() : grads.error().message));
  return *grads;
}

CheckVerdict check_vjp(std::string_view name, Op op, const std::vector<Tensor>& inputs, const Tensor& output,
                       const Tensor& grad, const std::vector<Tensor>& input_grads, const OpAttrs& attrs = {},
                       std::uint64_t seed = 1) {
  const RegisteredChecker* checker = standard_checkers().find(name);
  REQUIRE_MESSAGE(checker != nullptr, "no checker " << name);
  REQUIRE(checker->spec.obligation == Obligation::Vjp);
  CheckerRng rng(checker_stream_seed(seed, "test.vjp", 0));
  CheckCall call{op, inputs, &output, &attrs, &grad, input_grads};
  auto verdict = run_checker(*checker, call, rng);
  REQUIRE_MESSAGE(verdict.has_value(), (verdict ? std::string() : verdict.error().message));
  return *verdict;
}

std::string describe(const CheckVerdict& v) {
  return str(v.passed ? "pass" : "fail", ": ", v.worst.what, " ", v.worst.index, ": residual ", v.worst.residual,
             " bound ", v.worst.bound);
}

constexpr DType kDTypes[] = {DType::F32, DType::F64};

}  // namespace

TEST_SUITE("checkers") {
  TEST_CASE("the registry holds the standard checkers by name, with their op, coverage and obligation") {
    const CheckerRegistry& registry = standard_checkers();
    CHECK(registry.size() == 15);
    const RegisteredChecker* matmul = registry.find("freivalds.matmul");
    REQUIRE(matmul != nullptr);
    CHECK(matmul->spec.op == Op::Matmul);
    CHECK(matmul->spec.coverage == CheckerCoverage::Full);
    CHECK(matmul->spec.obligation == Obligation::Value);
    CHECK(testing::has(matmul->site, "handlers/checkers/src/register.cpp:"));
    auto attention = registry.for_op(Op::ScaledDotProductAttention, Device::Cpu);
    REQUIRE(attention.size() == 2);
    std::set<std::string_view> labels;
    for (const auto* c : attention) labels.insert(to_string(c->spec.coverage));
    CHECK(labels == std::set<std::string_view>{"partial", "sampled"});
    CHECK(registry.for_op(Op::Matmul, Device::Cuda).empty());
    CHECK(registry.find("freivalds.nothing") == nullptr);
  }

  TEST_CASE("a duplicate name, a missing name or a missing function is rejected at registration") {
    CheckerRegistry registry;
    REQUIRE(register_standard_checkers(registry).has_value());
    auto again = register_standard_checkers(registry);
    REQUIRE_FALSE(again.has_value());
    CHECK(again.error().code == RuntimeCode::DuplicateHandler);
    CHECK(testing::has(again.error().message, "duplicate checker `freivalds.matmul`"));
    CheckerSpec nameless{"", Op::Relu, Device::Cpu, CheckerCoverage::Full, Obligation::Value,
                         registry.find("ratio.softmax")->spec.check, ""};
    CHECK(registry.add(nameless).error().code == RuntimeCode::InvalidArgument);
    CheckerSpec no_function{"x.relu", Op::Relu, Device::Cpu, CheckerCoverage::Full, Obligation::Value, nullptr, ""};
    CHECK(testing::has(registry.add(no_function).error().message, "has no check function"));
    CheckerSpec shape_checker{"x.shape", Op::Relu, Device::Cpu, CheckerCoverage::Full, Obligation::Shape,
                              registry.find("ratio.softmax")->spec.check, ""};
    CHECK(testing::has(registry.add(shape_checker).error().message,
                       "checks the shape obligation; expected value or vjp"));
  }

  TEST_CASE("a checker refuses another op's call, and a VJP checker a call without an output gradient") {
    CheckerRng rng(1);
    CheckerRng seeds(2);
    Tensor x = random_tensor({2, 3}, DType::F32, seeds);
    Tensor y = reference(Op::Softmax, {x});
    OpAttrs attrs;
    std::vector<Tensor> inputs{x};
    CheckCall call{Op::LogSoftmax, inputs, &y, &attrs, nullptr, {}};
    auto refused = run_checker(*standard_checkers().find("ratio.softmax"), call, rng);
    REQUIRE_FALSE(refused.has_value());
    CHECK(testing::has(refused.error().message, "checks softmax, not log_softmax"));
    RegisteredChecker vjp{standard_checkers().find("ratio.softmax")->spec, "here"};
    vjp.spec.obligation = Obligation::Vjp;
    call.op = Op::Softmax;
    CHECK(testing::has(run_checker(vjp, call, rng).error().message, "no output gradient"));
  }

  TEST_CASE("the checker stream depends on seed, capsule and call index only, and is deterministic") {
    const std::uint64_t base = checker_stream_seed(7, "libtorch.matmul.cpu", 3);
    CHECK(base == checker_stream_seed(7, "libtorch.matmul.cpu", 3));
    CHECK(base != checker_stream_seed(8, "libtorch.matmul.cpu", 3));
    CHECK(base != checker_stream_seed(7, "libtorch.matmul.cpu", 4));
    CHECK(base != checker_stream_seed(7, "libtorch.matmul.cpv", 3));
    CheckerRng a(base), b(base);
    int plus = 0;
    for (int i = 0; i < 4000; ++i) {
      const double s = a.sign();
      CHECK(s == b.sign());
      plus += s > 0 ? 1 : 0;
    }
    CHECK(plus > 1800);
    CHECK(plus < 2200);
    for (int i = 0; i < 100; ++i) CHECK(a.below(3) < 3);
    CHECK(a.below(0) == 0);  // an empty range returns rather than loops
  }

  TEST_CASE("fill_signs takes 64 signs from each draw, most significant bit first, balanced") {
    CheckerRng filled(checker_stream_seed(7, "libtorch.matmul.cpu", 3)), drawn(checker_stream_seed(7, "libtorch.matmul.cpu", 3));
    std::vector<double> signs(4000 + 37, 0.0);  // a partial last word
    filled.fill_signs(signs.data(), signs.size());
    int plus = 0;
    std::uint64_t bits = 0;
    for (std::size_t i = 0; i < signs.size(); ++i) {
      if (i % 64 == 0) bits = drawn.next();
      CHECK(signs[i] == (((bits >> (63 - i % 64)) & 1U) != 0 ? -1.0 : 1.0));
      plus += signs[i] > 0 ? 1 : 0;
    }
    CHECK(plus > 1818);  // 4037 fair signs: mean 2018.5, standard deviation about 32
    CHECK(plus < 2218);
    CHECK(filled.next() == drawn.next());  // one draw per 64 signs, the partial word included
  }

  TEST_CASE("Freivalds never rejects correct products over many seeds") {
    CheckerRng seeds(11);
    const std::vector<std::vector<std::int64_t>> shapes_a{{1, 1}, {3, 5}, {17, 33}, {2, 4, 9}, {2, 3, 0}, {64, 64}};
    const std::vector<std::vector<std::int64_t>> shapes_b{{1, 1}, {5, 2}, {33, 9}, {2, 9, 7}, {2, 0, 4}, {64, 64}};
    for (DType dtype : kDTypes) {
      for (std::size_t s = 0; s < shapes_a.size(); ++s) {
        for (std::uint64_t seed = 0; seed < 40; ++seed) {
          // Magnitudes spread over many binades, so rounding is as large as it gets relative to
          // the result.
          Tensor a = random_tensor(shapes_a[s], dtype, seeds, -8.0, 8.0);
          Tensor b = random_tensor(shapes_b[s], dtype, seeds, -8.0, 8.0);
          Tensor c = reference(Op::Matmul, {a, b});
          CheckVerdict v = check("freivalds.matmul", Op::Matmul, {a, b}, c, {}, seed);
          CHECK_MESSAGE(v.passed, describe(v));
          OpAttrs scaled;
          scaled.alpha = -0.37;
          Tensor cs = reference(Op::ScaledMatmul, {a, b}, scaled);
          CHECK(check("freivalds.scaled_matmul", Op::ScaledMatmul, {a, b}, cs, scaled, seed).passed);
          Tensor sm = reference(Op::SoftmaxMatmul, {a, b});
          CheckVerdict vs = check("freivalds.softmax_matmul", Op::SoftmaxMatmul, {a, b}, sm, {}, seed);
          CHECK_MESSAGE(vs.passed, describe(vs));
        }
      }
      for (std::uint64_t seed = 0; seed < 40; ++seed) {
        Tensor x = random_tensor({3, 5, 16}, dtype, seeds, -4.0, 4.0);
        Tensor w = random_tensor({7, 16}, dtype, seeds, -4.0, 4.0);
        Tensor b = random_tensor({7}, dtype, seeds, -4.0, 4.0);
        CHECK(check("freivalds.linear", Op::Linear, {x, w, b}, reference(Op::Linear, {x, w, b}), {}, seed).passed);
        CHECK(check("freivalds.linear", Op::Linear, {x, w}, reference(Op::Linear, {x, w}), {}, seed).passed);
      }
    }
  }

  TEST_CASE("Freivalds accepts a product summed in another order, as another provider's kernel would") {
    // Reverse summation order in float32: a different correctly computed product, not the
    // reference's bits.
    CheckerRng seeds(12);
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      const std::int64_t m = 9, k = 200, n = 11;
      Tensor a = random_tensor({m, k}, DType::F32, seeds);
      Tensor b = random_tensor({k, n}, DType::F32, seeds);
      std::vector<double> c(static_cast<std::size_t>(m * n));
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          float acc = 0.0F;
          for (std::int64_t p = k - 1; p >= 0; --p) acc += a.data<float>()[i * k + p] * b.data<float>()[p * n + j];
          c[static_cast<std::size_t>(i * n + j)] = acc;
        }
      }
      Tensor out = with_values(reference(Op::Matmul, {a, b}), c);
      CHECK(check("freivalds.matmul", Op::Matmul, {a, b}, out, {}, seed).passed);
    }
  }

  TEST_CASE("Freivalds catches a product with a corrupted row, and names the row") {
    CheckerRng seeds(13);
    for (DType dtype : kDTypes) {
      for (std::uint64_t seed = 0; seed < 50; ++seed) {
        Tensor a = random_tensor({2, 8, 12}, dtype, seeds);
        Tensor b = random_tensor({2, 12, 6}, dtype, seeds);
        std::vector<double> c = reference(Op::Matmul, {a, b}).to_vector();
        // Row 3 of batch entry 1 is off by 1e-3·2^j (the floor is about 1e-5 in float32). Powers of
        // two make the fault uncancellable: |Σ ±2^j| >= 1 for every choice of signs, so the
        // residual is at least 1e-3 whatever the draw (a row shifted by one constant would cancel
        // whenever the signs balance: that is the stated 1/2 per round).
        for (std::int64_t j = 0; j < 6; ++j) c[static_cast<std::size_t>(48 + 3 * 6 + j)] += 1e-3 * std::ldexp(1.0, static_cast<int>(j));
        Tensor bad = with_values(reference(Op::Matmul, {a, b}), c);
        CheckVerdict v = check("freivalds.matmul", Op::Matmul, {a, b}, bad, {}, seed);
        REQUIRE_FALSE(v.passed);
        CHECK(v.worst.index == 48 + 3 * 6);
        CHECK(v.worst.residual > v.worst.bound);
      }
    }
  }

  TEST_CASE("the Freivalds row kernels give every row's dots and absolute sum, blocked or not, as a plain loop") {
    // Rows 0 to 17 (AVX2's blocks of four, AVX-512's blocks of eight, and the rows after them),
    // lengths 0 to 13 and around one and two cache lines of floats (the tail alone, single
    // vectors, whole lines of vectors and the vectors after them), 0 to 3 rounds (none, pairs of
    // rounds and a single one), no magnitude, Σ|x| and Σ|x|·w, rows further apart than their
    // length; the dispatched kernel and each kernel the CPU runs (portable, AVX2, AVX-512).
    CheckerRng values(21);
    auto value = [&values] { return static_cast<double>(values.next() >> 11) * 0x1p-50 - 4.0; };
    std::vector<std::int64_t> lengths{15, 16, 17, 24, 31, 32, 33, 47};
    for (std::int64_t len = 0; len <= 13; ++len) lengths.push_back(len);
    for (std::int64_t rows = 0; rows <= 17; ++rows) {
      for (const std::int64_t len : lengths) {
        for (std::int64_t rounds = 0; rounds <= 3; ++rounds) {
          // 0: no magnitude (a null abs_sums), 1: Σ|x|, 2: Σ|x|·w. Zero rounds: magnitudes alone.
          for (const int magnitude : {0, 1, 2}) {
            if (rounds == 0 && magnitude == 0) continue;
            const bool weighted = magnitude == 2;
            const std::int64_t ld = len + 3;
            std::vector<float> x(static_cast<std::size_t>(std::max<std::int64_t>(rows * ld, 1)));
            for (float& v : x) v = static_cast<float>(value());
            std::vector<double> y(static_cast<std::size_t>(rounds * (len + 1) + 1));
            for (double& v : y) v = value();
            std::vector<double> w(static_cast<std::size_t>(len + 1));
            for (double& v : w) v = std::fabs(value());
            const std::int64_t ys = len + 1;
            std::vector<double> want_dots(static_cast<std::size_t>(rows * rounds)), want_abs(static_cast<std::size_t>(rows));
            for (std::int64_t i = 0; i < rows; ++i) {
              for (std::int64_t j = 0; j < len; ++j) {
                const double v = x[static_cast<std::size_t>(i * ld + j)];
                for (std::int64_t r = 0; r < rounds; ++r) {
                  want_dots[static_cast<std::size_t>(r * rows + i)] += v * y[static_cast<std::size_t>(r * ys + j)];
                }
                want_abs[static_cast<std::size_t>(i)] += std::fabs(v) * (weighted ? w[static_cast<std::size_t>(j)] : 1.0);
              }
            }
            using checkers::detail::MultiDotKernel;
            // -1: the dispatched kernel; then each kernel this CPU runs.
            for (const int kernel : {-1, 0, 1, 2}) {
              INFO("rows " << rows << ", len " << len << ", rounds " << rounds << ", magnitude " << magnitude
                           << ", kernel " << kernel << " (-1 dispatched, 0 portable, 1 AVX2, 2 AVX-512)");
              std::vector<double> dots(want_dots.size(), -1.0), abs_sums(want_abs.size(), -1.0);
              const double* wp = weighted ? w.data() : nullptr;
              double* abs_out = magnitude == 0 ? nullptr : abs_sums.data();
              if (kernel < 0) {
                checkers::multi_dot_rows(x.data(), rows, ld, len, y.data(), ys, rounds, wp, dots.data(), abs_out);
              } else if (!checkers::detail::multi_dot_rows_with(static_cast<MultiDotKernel>(kernel), x.data(), rows,
                                                                ld, len, y.data(), ys, rounds, wp, dots.data(),
                                                                abs_out)) {
                CHECK(kernel > 0);  // the portable loops run everywhere
                if (rows == 0 && len == 0 && rounds == 1 && magnitude == 1) {
                  MESSAGE("this CPU lacks kernel " << kernel << " (1 AVX2, 2 AVX-512): not tested here");
                }
                continue;
              }
              // Sums of at most 47 terms of magnitude <= 16 in another order: within 47·γ₄₇·16 < 1e-11.
              for (std::size_t q = 0; q < dots.size(); ++q) CHECK(std::fabs(dots[q] - want_dots[q]) <= 1e-11);
              for (std::size_t q = 0; q < abs_sums.size(); ++q) {
                if (magnitude == 0) CHECK(abs_sums[q] == -1.0);  // not written
                else CHECK(std::fabs(abs_sums[q] - want_abs[q]) <= 1e-11);
              }
              // Each row alone gives the same bits as in its block: the screen recomputes a missed
              // row's magnitudes alone and must get the bound the unscreened check got.
              for (std::int64_t i = 0; i < rows; ++i) {
                std::vector<double> row_dots(static_cast<std::size_t>(rounds), -1.0);
                double row_abs = -1.0;
                const float* xi = x.data() + i * ld;
                double* row_abs_out = magnitude == 0 ? nullptr : &row_abs;
                if (kernel < 0) {
                  checkers::multi_dot_rows(xi, 1, ld, len, y.data(), ys, rounds, wp, row_dots.data(), row_abs_out);
                } else {
                  checkers::detail::multi_dot_rows_with(static_cast<MultiDotKernel>(kernel), xi, 1, ld, len, y.data(),
                                                        ys, rounds, wp, row_dots.data(), row_abs_out);
                }
                for (std::int64_t r = 0; r < rounds; ++r) {
                  CHECK(row_dots[static_cast<std::size_t>(r)] == dots[static_cast<std::size_t>(r * rows + i)]);
                }
                if (magnitude != 0) CHECK(row_abs == abs_sums[static_cast<std::size_t>(i)]);
              }
            }
          }
        }
      }
    }
  }

  TEST_CASE("Freivalds names whichever row is corrupted, in a block of rows or after the last block") {
    // The check reads rows in blocks of four (AVX2) or eight (AVX-512) (multi_dot_rows); 9 rows
    // and an inner dimension of 13 leave a remainder on both axes, so every row's residual must
    // land on its own index.
    CheckerRng seeds(15);
    for (DType dtype : kDTypes) {
      const Tensor a = random_tensor({9, 13}, dtype, seeds);
      const Tensor b = random_tensor({13, 7}, dtype, seeds);
      const Tensor c = reference(Op::Matmul, {a, b});
      for (std::int64_t row = 0; row < 9; ++row) {
        std::vector<double> values = c.to_vector();
        for (std::int64_t j = 0; j < 7; ++j) {
          values[static_cast<std::size_t>(row * 7 + j)] += 1e-2 * std::ldexp(1.0, static_cast<int>(j));
        }
        const CheckVerdict v = check("freivalds.matmul", Op::Matmul, {a, b}, with_values(c, values), {}, 3);
        REQUIRE_FALSE(v.passed);
        CHECK(v.worst.index == row * 7);
      }
    }
  }

  TEST_CASE("Freivalds catches every single-entry error above the stated floor of twice the row tolerance") {
    // docs/checkers.md: an entry error |ΔC_ij| > 2·τ_i is caught whatever the signs. The test
    // computes τ_i as the checker states it and perturbs one entry by 2.2·τ_i.
    CheckerRng seeds(14);
    const std::int64_t m = 16, k = 48, n = 16;
    const double u = std::numeric_limits<float>::epsilon() / 2.0;
    int caught = 0;
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
      Tensor a = random_tensor({m, k}, DType::F32, seeds);
      Tensor b = random_tensor({k, n}, DType::F32, seeds);
      Tensor c = reference(Op::Matmul, {a, b});
      const std::int64_t i = static_cast<std::int64_t>(seeds.below(m)), j = static_cast<std::int64_t>(seeds.below(n));
      double t = 0.0, c_abs = 0.0;
      for (std::int64_t p = 0; p < k; ++p) {
        double row = 0.0;
        for (std::int64_t q = 0; q < n; ++q) row += std::fabs(b.at(p * n + q));
        t += std::fabs(a.at(i * k + p)) * row;
      }
      for (std::int64_t q = 0; q < n; ++q) c_abs += std::fabs(c.at(i * n + q));
      const double tau = freivalds_row_tolerance(u, static_cast<double>(k), k, n, t, c_abs);
      std::vector<double> values = c.to_vector();
      // Rounded to float32 the perturbation must stay above the floor: go up by one more ulp.
      const float moved = static_cast<float>(values[static_cast<std::size_t>(i * n + j)] + 2.2 * tau);
      REQUIRE(std::fabs(static_cast<double>(moved) - c.at(i * n + j)) > 2.0 * tau);
      values[static_cast<std::size_t>(i * n + j)] = moved;
      caught += check("freivalds.matmul", Op::Matmul, {a, b}, with_values(c, values), {}, seed).passed ? 0 : 1;
    }
    CHECK(caught == 200);
  }

  TEST_CASE("a row whose A·s cancels passes on the screen's second stage, else on the exact tolerance, and fails beyond it") {
    // docs/checkers.md, "The screen". Every row of A sums to zero and B's rows (W's columns for
    // linear) are equal, so A·(B·r) is exactly 0 whatever the signs: the first stage's lower bound
    // is 0. The second stage's, γ_K·½·Σ_p |A_ip|·max_ρ |s_ρ,p|, is at most half the exact bound's
    // first term (|s_ρ,p| <= (|B|·1)_p), so an error of 0.9·τ_i misses it too and goes to the
    // exact tolerance τ_i, computed here as the checker states it. It passes, with τ_i as the
    // verdict's bound (the magnitudes were computed for that row); one of 2.2·τ_i fails. B's row
    // keeps the computed |s_ρ,p| at 0.0999… or more whatever the signs (no choice of signs sums
    // 0.1, 0.2, 0.3 and 0.7 to less), so the second stage's bound is at least 0.0069·τ_i in float64
    // (0.038·τ_i in float32): an error of 0.005·τ_i passes there, on a positive bound below τ_i,
    // without the exact path.
    const double u32 = std::numeric_limits<float>::epsilon() / 2.0, u64 = std::numeric_limits<double>::epsilon() / 2.0;
    for (DType dtype : kDTypes) {
      const double u = dtype == DType::F32 ? u32 : u64;
      const std::vector<double> a_values{1.0, -1.0, 2.0, -2.0, 0.5, -0.5};  // [3, 2]
      const std::vector<double> b_row{0.1, 0.2, -0.3, 0.7};                  // both rows of B [2, 4]
      std::vector<double> b_values = b_row;
      b_values.insert(b_values.end(), b_row.begin(), b_row.end());
      std::vector<double> w_values;  // W [4, 2] = Bᵀ for linear
      for (double v : b_row) w_values.insert(w_values.end(), {v, v});
      const Tensor a = Tensor::from_values(Shape::make({3, 2}).value(), dtype, a_values).value();
      const Tensor b = Tensor::from_values(Shape::make({2, 4}).value(), dtype, b_values).value();
      const Tensor w = Tensor::from_values(Shape::make({4, 2}).value(), dtype, w_values).value();
      for (const Op op : {Op::Matmul, Op::Linear}) {
        const std::vector<Tensor> inputs = op == Op::Matmul ? std::vector<Tensor>{a, b} : std::vector<Tensor>{a, w};
        const Tensor c = reference(op, inputs);
        for (double v : c.to_vector()) REQUIRE(v == 0.0);
        const std::int64_t row = 1, col = 2;
        double b_abs = 0.0;  // every row of |B| sums to the same
        for (double v : b_row) b_abs += std::fabs(static_cast<double>(dtype == DType::F32 ? static_cast<float>(v) : v));
        const double t = (std::fabs(a_values[2]) + std::fabs(a_values[3])) * b_abs;
        for (const double times : {0.005, 0.9, 2.2}) {
          INFO(to_string(dtype) << " " << to_string(op) << ", an error of " << times << " tau");
          // The tolerance of the row with its one moved entry in |C|·1.
          double tau = 0.0, moved = 0.0;
          for (int pass = 0; pass < 2; ++pass) {
            tau = freivalds_row_tolerance(u, 2.0, 2, 4, t, std::fabs(moved));
            moved = times * tau;
            if (dtype == DType::F32) moved = static_cast<float>(moved);
          }
          std::vector<double> values = c.to_vector();
          values[static_cast<std::size_t>(row * 4 + col)] = moved;
          const CheckVerdict v = check(op == Op::Matmul ? "freivalds.matmul" : "freivalds.linear", op, inputs,
                                       with_values(c, values), {}, 5);
          CHECK(v.passed == (times < 1.0));
          CHECK(v.worst.index == row * 4);
          CHECK(v.worst.residual == moved);
          if (times < 0.01) {
            CHECK(v.worst.bound > 0.0);  // not the first stage's 0
            CHECK(v.worst.bound < 0.6 * tau);
          } else {
            // The check adds its own underflow allowance to τ_i: a few subnormals.
            CHECK(v.worst.bound >= tau);
            CHECK(v.worst.bound <= tau * (1.0 + 1e-12) + 1e-40);
          }
        }
      }
    }
  }

  TEST_CASE("the screen passes only on a bound below the exact tolerance, and between the two the exact path decides") {
    // docs/checkers.md, "The screen". With n = 1 and positive A and B, |A·(B·r)| is t_i itself,
    // so the screen's lower bound is about τ_i/2 in float32 (the provider's rounding dominates τ_i)
    // and about τ_i/4 in float64 (the check's own rounding is as large). An error of 0.2·τ_i
    // passes on the screen, whose reported bound stays below 0.6·τ_i (a screen without the
    // factor ½ would report about τ_i); 0.9·τ_i misses the screen and passes on the exact τ_i;
    // 1.1·τ_i fails on it.
    const double u32 = std::numeric_limits<float>::epsilon() / 2.0, u64 = std::numeric_limits<double>::epsilon() / 2.0;
    CheckerRng seeds(31);
    for (DType dtype : kDTypes) {
      const double u = dtype == DType::F32 ? u32 : u64;
      const std::int64_t k = 64;
      const Tensor a = random_tensor({1, k}, dtype, seeds, 0.5, 1.0);
      const Tensor b = random_tensor({k, 1}, dtype, seeds, 0.5, 1.0);
      const Tensor c = reference(Op::Matmul, {a, b});
      double t = 0.0;
      for (std::int64_t p = 0; p < k; ++p) t += a.at(p) * b.at(p);
      for (const double times : {0.2, 0.9, 1.1}) {
        INFO(to_string(dtype) << ", an error of " << times << " tau");
        double tau = freivalds_row_tolerance(u, static_cast<double>(k), k, 1, t, std::fabs(c.at(0)));
        double moved = c.at(0) + times * tau;
        if (dtype == DType::F32) moved = static_cast<float>(moved);
        tau = freivalds_row_tolerance(u, static_cast<double>(k), k, 1, t, std::fabs(moved));
        const double error = std::fabs(moved - c.at(0));
        REQUIRE(error > (times - 0.05) * tau);  // float32 rounding of the moved entry keeps it near
        REQUIRE(error < (times + 0.05) * tau);
        const CheckVerdict v = check("freivalds.matmul", Op::Matmul, {a, b}, with_values(c, {moved}), {}, 3);
        CHECK(v.passed == (times < 1.0));
        if (times < 0.5) {
          CHECK(v.worst.bound < 0.6 * tau);  // the screen's bound
        } else {
          CHECK(v.worst.bound >= tau * (1.0 - 1e-9));  // the exact tolerance
        }
      }
    }
  }

  TEST_CASE("the screen passes a row whose exact bound would overflow when its residual meets the finite lower bound") {
    // docs/checkers.md, "The screen": the one verdict that differs from the exact tolerance alone
    // (which fails a row whose bound overflowed). Here t̂ = 1e308 + 1e308 is +inf, but
    // A·(B·r) = 0 and the residual is 0, within the finite lower bound 0.
    auto f64 = [](std::vector<std::int64_t> dims, std::vector<double> values) {
      return Tensor::from_values(Shape::make(dims).value(), DType::F64, values).value();
    };
    const Tensor a = f64({1, 2}, {1e308, 1e308});
    const Tensor b = f64({2, 1}, {1.0, -1.0});
    const Tensor c = f64({1, 1}, {0.0});
    const CheckVerdict v = check("freivalds.matmul", Op::Matmul, {a, b}, c, {}, 1);
    CHECK(v.passed);
    CHECK(v.worst.bound == 0.0);
    CHECK(v.worst.residual == 0.0);
    // The same row with a residual above that bound takes the exact path, and its infinite bound fails.
    const Tensor off = f64({1, 1}, {1.0});
    const CheckVerdict w = check("freivalds.matmul", Op::Matmul, {a, b}, off, {}, 1);
    CHECK_FALSE(w.passed);
    CHECK(std::isinf(w.worst.bound));
  }

  TEST_CASE("the screen gives the exact tolerance's verdicts: the same pass or fail, failing row, residual and bound") {
    // docs/checkers.md, "The screen". FreivaldsTolerance::ExactOnly is the check without the
    // screen: both draw the same signs and run the same arithmetic, so they may differ only in the
    // bound a passing row reports. Random products of every screened op in both dtypes, with
    // operands of mixed sign, positive ones (where |A·(B·r)| comes near t_i, and the first stage's
    // bound near half the exact bound's first term) and tiny ones (float64 products below 2⁻⁹⁰⁰,
    // where the first stage's t_low is 0; the bias is tinier still, so it does not lift the bound);
    // one entry of one row moves by 0 to 3 times an estimate of that row's τ_i, so the cases
    // straddle the screen's bounds and τ_i. Then the product VJP checks, on perturbed gradients.
    const double u32 = std::numeric_limits<float>::epsilon() / 2.0, u64 = std::numeric_limits<double>::epsilon() / 2.0;
    struct Dims {
      std::int64_t batch, m, k, n;
    };
    const std::vector<Dims> dims{{1, 1, 1, 1}, {1, 1, 64, 1}, {1, 5, 7, 1}, {2, 6, 9, 2}, {1, 9, 33, 17}, {2, 4, 100, 3}};
    // NaN: the moved entry becomes NaN, and both ways must fail at it with the same NaN residual.
    const double factors[] = {0.0, 0.3, 0.7, 0.95, 1.05, 1.5, 3.0, std::numeric_limits<double>::quiet_NaN()};
    CheckerRng seeds(61);
    int passes = 0, fails = 0, screen_bounds = 0;
    auto compare = [&](const RuntimeResult<CheckVerdict>& screened, const RuntimeResult<CheckVerdict>& exact) {
      REQUIRE(screened.has_value());
      REQUIRE(exact.has_value());
      CHECK(screened->passed == exact->passed);
      if (!exact->passed) {
        ++fails;
        CHECK(screened->worst.index == exact->worst.index);
        // NaN on both sides (a NaN residual fails) is the same verdict, which == would not say.
        auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
        CHECK(same(screened->worst.residual, exact->worst.residual));
        CHECK(same(screened->worst.bound, exact->worst.bound));
        CHECK(screened->worst.what == exact->worst.what);  // which gradient, for the VJP checks
      } else {
        ++passes;
        // Each row's screen bound is at most its exact bound, so the worst ratio of residual to
        // bound can only grow.
        auto ratio = [](const CheckVerdict& v) { return v.worst.bound > 0.0 ? v.worst.residual / v.worst.bound : 0.0; };
        CHECK(ratio(*screened) >= ratio(*exact));
        if (ratio(*screened) > ratio(*exact)) ++screen_bounds;
      }
    };
    for (DType dtype : kDTypes) {
      const double u = dtype == DType::F32 ? u32 : u64;
      for (int family = 0; family < 3; ++family) {
        const double lo = family == 1 ? 0.5 : -1.0;
        const double scale = family == 2 ? (dtype == DType::F32 ? 0x1p-30 : 0x1p-500) : 1.0;
        for (const Dims& d : dims) {
          for (const Op op : {Op::Matmul, Op::ScaledMatmul, Op::Linear}) {
            const bool linear = op == Op::Linear;
            if (linear && d.batch != 1) continue;
            const Tensor a = random_tensor(linear ? std::vector<std::int64_t>{d.m, d.k} : std::vector<std::int64_t>{d.batch, d.m, d.k},
                                           dtype, seeds, lo * scale, scale);
            const Tensor b = random_tensor(linear ? std::vector<std::int64_t>{d.n, d.k} : std::vector<std::int64_t>{d.batch, d.k, d.n},
                                           dtype, seeds, lo * scale, scale);
            const Tensor bias = random_tensor({d.n}, dtype, seeds, lo * scale * scale, scale * scale);
            OpAttrs attrs;
            attrs.alpha = family == 1 ? 3.5 : -0.37;
            std::vector<Tensor> inputs{a, b};
            if (linear && d.m % 2 == 1) inputs.push_back(bias);
            const Tensor c = reference(op, inputs, attrs);
            const double alpha = op == Op::ScaledMatmul ? std::fabs(attrs.alpha) : 1.0;
            const double terms = static_cast<double>(d.k) + (op == Op::ScaledMatmul || inputs.size() == 3 ? 1.0 : 0.0);
            for (const double factor : factors) {
              // The moved entry and an estimate of its row's τ_i.
              const std::int64_t batch = static_cast<std::int64_t>(seeds.below(static_cast<std::uint64_t>(d.batch)));
              const std::int64_t i = static_cast<std::int64_t>(seeds.below(static_cast<std::uint64_t>(d.m)));
              const std::int64_t j = static_cast<std::int64_t>(seeds.below(static_cast<std::uint64_t>(d.n)));
              double t = 0.0, c_abs = 0.0, bias_abs = 0.0;
              for (std::int64_t p = 0; p < d.k; ++p) {
                double b_row = 0.0;  // (|B|·1)_p
                for (std::int64_t q = 0; q < d.n; ++q) {
                  b_row += std::fabs(linear ? b.at(q * d.k + p) : b.at((batch * d.k + p) * d.n + q));
                }
                t += std::fabs(a.at((batch * d.m + i) * d.k + p)) * b_row;
              }
              if (inputs.size() == 3) {
                for (std::int64_t q = 0; q < d.n; ++q) bias_abs += std::fabs(bias.at(q));
              }
              const std::int64_t row = (batch * d.m + i) * d.n;
              for (std::int64_t q = 0; q < d.n; ++q) c_abs += std::fabs(c.at(row + q));
              const double tau = freivalds_row_tolerance(u, terms, d.k, d.n, alpha * (t + bias_abs), c_abs);
              std::vector<double> values = c.to_vector();
              values[static_cast<std::size_t>(row + j)] += factor * tau;
              const Tensor moved = with_values(c, values);
              INFO(to_string(dtype) << " " << to_string(op) << " family " << family << " [" << d.batch << ", " << d.m
                                    << ", " << d.k << ", " << d.n << "], " << factor << " tau at row " << row);
              CheckCall call{op, inputs, &moved, &attrs, nullptr, {}};
              CheckerRng screened_rng(checker_stream_seed(7, "screen", static_cast<std::uint64_t>(passes + fails)));
              CheckerRng exact_rng = screened_rng;
              compare(check_product(call, screened_rng, kFreivaldsRounds, FreivaldsTolerance::Screened),
                      check_product(call, exact_rng, kFreivaldsRounds, FreivaldsTolerance::ExactOnly));
            }
          }
        }
      }
    }
    // Both verdicts occur, and the screen decided many passes.
    CHECK(fails > 100);
    CHECK(passes > 100);
    CHECK(screen_bounds > 50);

    // The VJP checks: one entry of one gradient moved by 2^e·u·D²·W/4 with e in [-6, 6], around
    // the size of its row's tolerance (D the gradient product's inner dim, W its row length;
    // entries uniform in [-1, 1]).
    const int forward_passes = passes, forward_fails = fails;
    for (DType dtype : kDTypes) {
      const double u = dtype == DType::F32 ? u32 : u64;
      for (std::uint64_t trial = 0; trial < 80; ++trial) {
        const bool linear = trial % 2 == 1;
        const std::int64_t m = 1 + static_cast<std::int64_t>(seeds.below(6));
        const std::int64_t k = 1 + static_cast<std::int64_t>(seeds.below(40));
        const std::int64_t n = 1 + static_cast<std::int64_t>(seeds.below(6));
        const Op op = linear ? Op::Linear : Op::Matmul;
        std::vector<Tensor> inputs{random_tensor({m, k}, dtype, seeds),
                                   random_tensor(linear ? std::vector<std::int64_t>{n, k} : std::vector<std::int64_t>{k, n},
                                                 dtype, seeds)};
        if (linear) inputs.push_back(random_tensor({n}, dtype, seeds));
        const Tensor out = reference(op, inputs);
        const Tensor g = random_tensor({m, n}, dtype, seeds);
        std::vector<Tensor> grads = reference_vjp(op, inputs, out, g);
        const std::size_t which = static_cast<std::size_t>(seeds.below(grads.size()));
        // dA = G·Bᵀ (inner dim n, rows of k), dB = Aᵀ·G (inner m, rows of n), db = 1ᵀ·G (inner m).
        const double inner = static_cast<double>(which == 0 ? n : m);
        const double width = static_cast<double>(grads[which].dim(grads[which].rank() - 1));
        std::vector<double> values = grads[which].to_vector();
        const double e = static_cast<double>(seeds.below(13)) - 6.0;
        values[static_cast<std::size_t>(seeds.below(values.size()))] += std::exp2(e) * u * inner * inner * width / 4.0;
        grads[which] = with_values(grads[which], values);
        INFO(to_string(dtype) << " " << to_string(op) << " VJP, gradient " << which << ", 2^" << e);
        const OpAttrs attrs;
        CheckCall call{op, inputs, &out, &attrs, &g, grads};
        CheckerRng screened_rng(checker_stream_seed(7, "screen.vjp", trial));
        CheckerRng exact_rng = screened_rng;
        compare(check_product_vjp(call, screened_rng, kFreivaldsRounds, FreivaldsTolerance::Screened),
                check_product_vjp(call, exact_rng, kFreivaldsRounds, FreivaldsTolerance::ExactOnly));
      }
    }
    CHECK(fails - forward_fails > 20);
    CHECK(passes - forward_passes > 20);
  }

  TEST_CASE("Freivalds misses a sign-cancelling error with probability 1/2 per round, as stated") {
    // ΔC_i0 = +δ, ΔC_i1 = -δ cancels exactly when r_0 = r_1: each round misses with probability
    // 1/2, two rounds 1/4. Over 400 seeds the detection rate is near 3/4.
    CheckerRng seeds(15);
    int caught = 0;
    for (std::uint64_t seed = 0; seed < 400; ++seed) {
      Tensor a = random_tensor({6, 10}, DType::F64, seeds);
      Tensor b = random_tensor({10, 5}, DType::F64, seeds);
      std::vector<double> c = reference(Op::Matmul, {a, b}).to_vector();
      c[10] += 0.5;
      c[11] -= 0.5;
      caught += check("freivalds.matmul", Op::Matmul, {a, b}, with_values(reference(Op::Matmul, {a, b}), c), {}, seed)
                        .passed
                    ? 0
                    : 1;
    }
    CHECK(caught > 260);  // 3/4 of 400 = 300, standard deviation about 9
    CHECK(caught < 340);
  }

  TEST_CASE("a NaN residual fails, and so do NaN and infinite inputs, and a wrong output shape is a failing verdict") {
    CheckerRng seeds(16);
    Tensor a = random_tensor({4, 4}, DType::F32, seeds);
    Tensor b = random_tensor({4, 4}, DType::F32, seeds);
    std::vector<double> c = reference(Op::Matmul, {a, b}).to_vector();
    c[5] = std::numeric_limits<double>::quiet_NaN();
    CheckVerdict v = check("freivalds.matmul", Op::Matmul, {a, b}, with_values(a, c), {});
    REQUIRE_FALSE(v.passed);
    CHECK(std::isnan(v.worst.residual));
    CHECK(v.worst.index == 4);
    std::vector<double> av = a.to_vector();
    av[0] = std::numeric_limits<double>::quiet_NaN();
    Tensor nan_a = with_values(a, av);
    CHECK_FALSE(check("freivalds.matmul", Op::Matmul, {nan_a, b}, reference(Op::Matmul, {nan_a, b})).passed);
    // An infinite input: the product is not bounded, so the check cannot vouch and fails
    // (docs/checkers.md, "Non-finite values").
    av = a.to_vector();
    av[0] = std::numeric_limits<double>::infinity();
    Tensor inf_a = with_values(a, av);
    CheckVerdict inf_v = check("freivalds.matmul", Op::Matmul, {inf_a, b}, reference(Op::Matmul, {inf_a, b}));
    CHECK_FALSE(inf_v.passed);
    CHECK(inf_v.worst.index == 0);
    Tensor wrong = random_tensor({4, 3}, DType::F32, seeds);
    CheckVerdict shape = check("freivalds.matmul", Op::Matmul, {a, b}, wrong);
    CHECK_FALSE(shape.passed);
    CHECK(testing::has(shape.worst.what, "output has shape [4, 3]; the inputs give [4, 4]"));
  }

  TEST_CASE("a malformed call is an error value, not a verdict") {
    CheckerRng seeds(17);
    Tensor a = random_tensor({4, 5}, DType::F32, seeds);
    Tensor b = random_tensor({4, 5}, DType::F32, seeds);
    Tensor out = random_tensor({4, 5}, DType::F32, seeds);
    OpAttrs attrs;
    std::vector<Tensor> inputs{a, b};
    CheckCall call{Op::Matmul, inputs, &out, &attrs, nullptr, {}};
    CheckerRng rng(1);
    auto result = run_checker(*standard_checkers().find("freivalds.matmul"), call, rng);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code == RuntimeCode::ShapeMismatch);
    Tensor b64 = random_tensor({5, 4}, DType::F64, seeds);
    inputs = {a, b64};
    CHECK(run_checker(*standard_checkers().find("freivalds.matmul"), call, rng).error().code == RuntimeCode::DTypeMismatch);
  }

  TEST_CASE("the product VJP checks accept the reference adjoints and catch a corrupted gradient row") {
    CheckerRng seeds(51);
    for (DType dtype : kDTypes) {
      for (std::uint64_t seed = 0; seed < 30; ++seed) {
        Tensor a = random_tensor({2, 7, 5}, dtype, seeds, -3.0, 3.0);
        Tensor b = random_tensor({2, 5, 4}, dtype, seeds, -3.0, 3.0);
        Tensor c = reference(Op::Matmul, {a, b});
        Tensor g = random_tensor({2, 7, 4}, dtype, seeds, -3.0, 3.0);
        std::vector<Tensor> grads = reference_vjp(Op::Matmul, {a, b}, c, g);
        CheckVerdict ok = check_vjp("freivalds.matmul.vjp", Op::Matmul, {a, b}, c, g, grads, {}, seed);
        CHECK_MESSAGE(ok.passed, describe(ok));
        OpAttrs scaled;
        scaled.alpha = 2.5;
        Tensor cs = reference(Op::ScaledMatmul, {a, b}, scaled);
        CHECK(check_vjp("freivalds.scaled_matmul.vjp", Op::ScaledMatmul, {a, b}, cs, g,
                        reference_vjp(Op::ScaledMatmul, {a, b}, cs, g, scaled), scaled, seed)
                  .passed);
        // dB's row 2 of batch entry 1 off by 1e-3·2^j: uncancellable (see the forward test).
        std::vector<double> db = grads[1].to_vector();
        for (std::int64_t j = 0; j < 4; ++j) db[static_cast<std::size_t>(20 + 2 * 4 + j)] += 1e-3 * std::ldexp(1.0, static_cast<int>(j));
        std::vector<Tensor> bad{grads[0], with_values(grads[1], db)};
        CheckVerdict caught = check_vjp("freivalds.matmul.vjp", Op::Matmul, {a, b}, c, g, bad, {}, seed);
        REQUIRE_FALSE(caught.passed);
        CHECK(caught.worst.index == 28);
        CHECK(testing::has(caught.worst.what, "gradient of input 1"));

        Tensor x = random_tensor({3, 6}, dtype, seeds);
        Tensor w = random_tensor({4, 6}, dtype, seeds);
        Tensor bias = random_tensor({4}, dtype, seeds);
        Tensor y = reference(Op::Linear, {x, w, bias});
        Tensor gy = random_tensor({3, 4}, dtype, seeds);
        std::vector<Tensor> lg = reference_vjp(Op::Linear, {x, w, bias}, y, gy);
        CheckVerdict lin = check_vjp("freivalds.linear.vjp", Op::Linear, {x, w, bias}, y, gy, lg, {}, seed);
        CHECK_MESSAGE(lin.passed, describe(lin));
        std::vector<double> dbias = lg[2].to_vector();
        dbias[1] += 1e-3;
        CheckVerdict bad_bias = check_vjp("freivalds.linear.vjp", Op::Linear, {x, w, bias}, y, gy,
                                          {lg[0], lg[1], with_values(lg[2], dbias)}, {}, seed);
        REQUIRE_FALSE(bad_bias.passed);
        CHECK(testing::has(bad_bias.worst.what, "gradient of input 2"));
      }
    }
  }

  TEST_CASE("a VJP check refuses a gradient of the wrong shape as an error value") {
    CheckerRng seeds(52);
    Tensor a = random_tensor({3, 4}, DType::F32, seeds);
    Tensor b = random_tensor({4, 2}, DType::F32, seeds);
    Tensor c = reference(Op::Matmul, {a, b});
    Tensor g = random_tensor({3, 2}, DType::F32, seeds);
    std::vector<Tensor> grads{random_tensor({4, 3}, DType::F32, seeds), Tensor()};
    OpAttrs attrs;
    std::vector<Tensor> inputs{a, b};
    CheckCall call{Op::Matmul, inputs, &c, &attrs, &g, grads};
    CheckerRng rng(1);
    auto result = run_checker(*standard_checkers().find("freivalds.matmul.vjp"), call, rng);
    REQUIRE_FALSE(result.has_value());
    CHECK(testing::has(result.error().message, "the gradient of input 0 is float32 [4, 3]; expected float32 [3, 4]"));
  }

  TEST_CASE("malformed calls of every checker family are error values naming the operands") {
    CheckerRng seeds(53);
    CheckerRng rng(1);
    OpAttrs attrs;
    auto run = [&](std::string_view name, Op op, std::vector<Tensor> inputs, const Tensor& out, const OpAttrs& a) {
      CheckCall call{op, inputs, &out, &a, nullptr, {}};
      return run_checker(*standard_checkers().find(name), call, rng);
    };
    Tensor x = random_tensor({2, 4, 5, 5}, DType::F32, seeds);
    Tensor w = random_tensor({3, 2, 3, 3}, DType::F32, seeds);
    OpAttrs three_groups;
    three_groups.groups = 3;  // 4 input channels do not split into 3 groups
    auto conv = run("checksum.conv", Op::Conv, {x, w}, x, three_groups);
    REQUIRE_FALSE(conv.has_value());
    CHECK(conv.error().code == RuntimeCode::ShapeMismatch);
    CHECK(testing::has(conv.error().message, "groups 3"));
    Tensor q = random_tensor({3, 4}, DType::F32, seeds);
    Tensor v = random_tensor({5, 2}, DType::F32, seeds);
    Tensor k = random_tensor({5, 4}, DType::F32, seeds);
    Tensor bad_mask = random_tensor({3, 4}, DType::F32, seeds);
    auto attention = run("recompute.attention", Op::ScaledDotProductAttention, {q, k, v, bad_mask}, q, attrs);
    REQUIRE_FALSE(attention.has_value());
    CHECK(testing::has(attention.error().message, "mask [3, 4]; expected [n, m] or [.., n, m]"));
    Tensor scores = random_tensor({2, 3}, DType::F32, seeds);
    auto masked = run("ratio.hard_masked_softmax", Op::HardMaskedSoftmax, {scores, q}, scores, attrs);
    REQUIRE_FALSE(masked.has_value());
    CHECK(testing::has(masked.error().message, "mask [3, 4] and scores [2, 3] differ"));
    std::vector<Tensor> inputs{q, k};
    CheckCall call{Op::Matmul, inputs, &q, &attrs, nullptr, {}};
    CHECK(testing::has(check_product(call, rng, 0).error().message, "at least 1 round"));
    call.op = Op::Relu;
    CHECK(testing::has(check_product(call, rng, 2).error().message, "does not check relu"));
  }

  TEST_CASE("sqrt and inv: the inverse checks accept correctly rounded results and special values, and catch 2 ulps") {
    CheckerRng seeds(61);
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (DType dtype : kDTypes) {
      const bool f32 = dtype == DType::F32;
      const double tiny = f32 ? static_cast<double>(std::numeric_limits<float>::denorm_min())
                              : std::numeric_limits<double>::denorm_min();
      const double huge = f32 ? static_cast<double>(std::numeric_limits<float>::max()) : std::numeric_limits<double>::max();
      std::vector<double> values{0.0, -0.0, inf, -inf, nan, -2.0, tiny, 3 * tiny, huge, -huge, 1.0 / huge, 2.0 / huge};
      for (int i = 0; i < 2000; ++i) {
        const double mantissa = 1.0 + static_cast<double>(seeds.next() >> 11) * 0x1p-53;
        values.push_back(seeds.sign() * std::ldexp(mantissa, static_cast<int>(seeds.below(f32 ? 250 : 2040)) - (f32 ? 125 : 1020)));
      }
      auto shape = Shape::make({static_cast<std::int64_t>(values.size())});
      Tensor x = *Tensor::from_values(*shape, dtype, values);
      for (Op op : {Op::Sqrt, Op::Inv}) {
        const std::string name = op == Op::Sqrt ? "inverse.sqrt" : "inverse.inv";
        Tensor y = reference(op, {x});
        CheckVerdict ok = check(name, op, {x}, y);
        CHECK_MESSAGE(ok.passed, describe(ok));
        // Entry 100 moved by 2 ulps: above the one-rounding floor.
        std::vector<double> yv = y.to_vector();
        const std::size_t at = 100;
        if (f32) {
          float moved = static_cast<float>(yv[at]);
          const float up = std::numeric_limits<float>::infinity();
          moved = std::nextafter(std::nextafter(moved, up), up);
          yv[at] = moved;
        } else {
          yv[at] = std::nextafter(std::nextafter(yv[at], inf), inf);
        }
        CheckVerdict bad = check(name, op, {x}, with_values(y, yv));
        CHECK_FALSE(bad.passed);
        // A special value answered wrongly: sqrt(-2) must be NaN, inv(+0) must be +inf.
        yv = y.to_vector();
        yv[op == Op::Sqrt ? 5 : 0] = 1.0;
        CheckVerdict special = check(name, op, {x}, with_values(y, yv));
        REQUIRE_FALSE(special.passed);
        CHECK(testing::has(special.worst.what, "special value"));
      }
      // The negative root squares to x as well, and is wrong.
      std::vector<double> roots = reference(Op::Sqrt, {x}).to_vector();
      std::size_t positive = 12;
      while (!(values[positive] > 0.0)) ++positive;
      roots[positive] = -roots[positive];
      CHECK_FALSE(check("inverse.sqrt", Op::Sqrt, {x}, with_values(x, roots)).passed);
    }
  }

  TEST_CASE("softmax, log_softmax and hard_masked_softmax checks accept correct lanes, -inf entries included") {
    CheckerRng seeds(21);
    const double ninf = -std::numeric_limits<double>::infinity();
    for (DType dtype : kDTypes) {
      for (std::uint64_t seed = 0; seed < 60; ++seed) {
        const double spread = seed % 3 == 0 ? 1.0 : (seed % 3 == 1 ? 30.0 : 300.0);
        Tensor x = random_tensor({3, 4, 37}, dtype, seeds, -spread, spread);
        std::vector<double> xv = x.to_vector();
        xv[5] = ninf;  // a masked logit
        x = with_values(x, xv);
        for (std::int64_t axis : {-1, 0, 1}) {
          OpAttrs attrs;
          attrs.axis = axis;
          CheckVerdict s = check("ratio.softmax", Op::Softmax, {x}, reference(Op::Softmax, {x}, attrs), attrs, seed);
          CHECK_MESSAGE(s.passed, describe(s));
          CheckVerdict l =
              check("ratio.log_softmax", Op::LogSoftmax, {x}, reference(Op::LogSoftmax, {x}, attrs), attrs, seed);
          CHECK_MESSAGE(l.passed, describe(l));
        }
        Tensor mask = random_tensor({3, 4, 37}, dtype, seeds, 0.0, 1.0);
        std::vector<double> mv = mask.to_vector();
        for (std::size_t i = 0; i < mv.size(); ++i) mv[i] = (mv[i] < 0.4 || i < 37) ? 0.0 : 1.0;  // row 0 fully blocked
        mask = with_values(mask, mv);
        OpAttrs attrs;
        CheckVerdict h = check("ratio.hard_masked_softmax", Op::HardMaskedSoftmax, {x, mask},
                               reference(Op::HardMaskedSoftmax, {x, mask}, attrs), attrs, seed);
        CHECK_MESSAGE(h.passed, describe(h));
      }
      Tensor scalar = *Tensor::scalar(dtype, 3.0);
      CHECK(check("ratio.softmax", Op::Softmax, {scalar}, reference(Op::Softmax, {scalar})).passed);
    }
  }

  TEST_CASE("softmax checks catch a lane not summing to one, a perturbed entry, and a wrong non-finite lane") {
    CheckerRng seeds(22);
    Tensor x = random_tensor({4, 50}, DType::F32, seeds, -5.0, 5.0);
    Tensor y = reference(Op::Softmax, {x});
    std::vector<double> yv = y.to_vector();
    for (std::size_t j = 50; j < 100; ++j) yv[j] *= 1.001;  // ratios intact, sum 1.001
    CheckVerdict scaled = check("ratio.softmax", Op::Softmax, {x}, with_values(y, yv));
    REQUIRE_FALSE(scaled.passed);
    CHECK(testing::has(scaled.worst.what, "lane sum residual"));
    CHECK(scaled.worst.index == 50);
    yv = y.to_vector();
    yv[130] *= 1.0001;  // one entry 1e-4 relative: far above a few hundred u
    CheckVerdict one = check("ratio.softmax", Op::Softmax, {x}, with_values(y, yv));
    REQUIRE_FALSE(one.passed);
    CHECK(one.worst.index == 130);
    // log_softmax shifted by a constant: differences intact, normalisation broken.
    std::vector<double> zv = reference(Op::LogSoftmax, {x}).to_vector();
    for (std::size_t j = 0; j < 50; ++j) zv[j] += 1e-3;
    CheckVerdict shifted = check("ratio.log_softmax", Op::LogSoftmax, {x}, with_values(y, zv));
    REQUIRE_FALSE(shifted.passed);
    CHECK(testing::has(shifted.worst.what, "normalisation"));
    // A lane holding NaN must be NaN: the reference's NaN lane passes, a finite answer fails.
    std::vector<double> xv = x.to_vector();
    xv[60] = std::numeric_limits<double>::quiet_NaN();
    Tensor nan_x = with_values(x, xv);
    Tensor nan_y = reference(Op::Softmax, {nan_x});
    CHECK(check("ratio.softmax", Op::Softmax, {nan_x}, nan_y).passed);
    CheckVerdict finite = check("ratio.softmax", Op::Softmax, {nan_x}, y);
    REQUIRE_FALSE(finite.passed);
    CHECK(testing::has(finite.worst.what, "must be NaN"));
    // A NaN output entry in a finite lane fails: its residual is NaN.
    yv = y.to_vector();
    yv[7] = std::numeric_limits<double>::quiet_NaN();
    CheckVerdict nan_out = check("ratio.softmax", Op::Softmax, {x}, with_values(y, yv));
    REQUIRE_FALSE(nan_out.passed);
    CHECK(std::isnan(nan_out.worst.residual));
  }

  TEST_CASE("hard_masked_softmax's check catches a leaking blocked entry") {
    CheckerRng seeds(23);
    Tensor x = random_tensor({3, 8}, DType::F64, seeds);
    Tensor mask = with_values(x, {1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0});
    Tensor allowed_all = with_values(x, std::vector<double>(24, 1.0));
    // The output of a kernel that ignored the mask: every blocked entry leaks weight.
    CheckVerdict v = check("ratio.hard_masked_softmax", Op::HardMaskedSoftmax, {x, mask},
                           reference(Op::HardMaskedSoftmax, {x, allowed_all}));
    REQUIRE_FALSE(v.passed);
    CHECK(v.worst.bound == 0.0);
  }

  TEST_CASE("attention: both checkers accept correct outputs with masks, causal rows and fully blocked rows") {
    CheckerRng seeds(31);
    for (DType dtype : kDTypes) {
      for (std::uint64_t seed = 0; seed < 20; ++seed) {
        Tensor q = random_tensor({2, 5, 4}, dtype, seeds, -2.0, 2.0);
        Tensor k = random_tensor({2, 7, 4}, dtype, seeds, -2.0, 2.0);
        Tensor v = random_tensor({2, 7, 3}, dtype, seeds, -2.0, 2.0);
        std::vector<double> mv(35);
        for (double& m : mv) m = seeds.below(3) == 0 ? 0.0 : 1.0;
        for (std::size_t j = 7; j < 14; ++j) mv[j] = 0.0;  // query 1 fully blocked
        Tensor mask = with_values(random_tensor({5, 7}, dtype, seeds), mv);
        OpAttrs attrs;
        attrs.causal = seed % 2 == 0;
        Tensor out = reference(Op::ScaledDotProductAttention, {q, k, v, mask}, attrs);
        CheckVerdict partial = check("blocked_rows.attention", Op::ScaledDotProductAttention, {q, k, v, mask}, out, attrs);
        CHECK_MESSAGE(partial.passed, describe(partial));
        CheckVerdict sampled = check("recompute.attention", Op::ScaledDotProductAttention, {q, k, v, mask}, out, attrs);
        CHECK_MESSAGE(sampled.passed, describe(sampled));
        Tensor plain = reference(Op::ScaledDotProductAttention, {q, k, v});
        CHECK(check("recompute.attention", Op::ScaledDotProductAttention, {q, k, v}, plain).passed);
      }
    }
  }

  TEST_CASE("attention: a leaking mask is caught, by the partial checker only where a blocked row leaks") {
    CheckerRng seeds(32);
    Tensor q = random_tensor({4, 8}, DType::F32, seeds);
    Tensor k = random_tensor({6, 8}, DType::F32, seeds);
    Tensor v = random_tensor({6, 5}, DType::F32, seeds);
    std::vector<double> mv(24, 1.0);
    for (std::size_t j = 0; j < 6; ++j) mv[6 + j] = 0.0;  // query 1 fully blocked
    mv[0] = 0.0;                                          // query 0 blocks key 0
    Tensor mask = with_values(random_tensor({4, 6}, DType::F32, seeds), mv);
    // Leak 1: query 1 sees key 2.
    std::vector<double> leak_row = mv;
    leak_row[6 + 2] = 1.0;
    Tensor out_row = reference(Op::ScaledDotProductAttention, {q, k, v, with_values(mask, leak_row)});
    CHECK_FALSE(check("blocked_rows.attention", Op::ScaledDotProductAttention, {q, k, v, mask}, out_row).passed);
    CHECK_FALSE(check("recompute.attention", Op::ScaledDotProductAttention, {q, k, v, mask}, out_row).passed);
    // Leak 2: query 0 sees its blocked key 0; no row is fully blocked there, so only the sampled
    // recomputation can see it.
    std::vector<double> leak_entry = mv;
    leak_entry[0] = 1.0;
    Tensor out_entry = reference(Op::ScaledDotProductAttention, {q, k, v, with_values(mask, leak_entry)});
    CHECK(check("blocked_rows.attention", Op::ScaledDotProductAttention, {q, k, v, mask}, out_entry).passed);
    CheckVerdict sampled = check("recompute.attention", Op::ScaledDotProductAttention, {q, k, v, mask}, out_entry);
    REQUIRE_FALSE(sampled.passed);
    CHECK(sampled.worst.index / 5 == 0);  // query 0's row
  }

  TEST_CASE("conv checksums accept correct outputs for every geometry, and catch a perturbed channel") {
    CheckerRng seeds(41);
    struct Geometry {
      std::vector<std::int64_t> x, w;
      std::vector<std::int64_t> stride, padding, dilation;
      std::int64_t groups;
    };
    const std::vector<Geometry> geometries{
        {{3, 4, 9, 8}, {6, 2, 3, 3}, {2, 1}, {1, 2}, {1, 2}, 2},
        {{2, 3, 7, 7}, {4, 3, 2, 3}, {}, {}, {}, 1},
        {{4, 6, 11}, {6, 1, 3}, {2}, {1}, {2}, 6},  // depthwise 1-D
        {{1, 2, 5, 6}, {3, 2, 5, 6}, {1, 1}, {0, 0}, {1, 1}, 1},
    };
    for (DType dtype : kDTypes) {
      for (const Geometry& g : geometries) {
        for (std::uint64_t seed = 0; seed < 20; ++seed) {
          Tensor x = random_tensor(g.x, dtype, seeds, -3.0, 3.0);
          Tensor w = random_tensor(g.w, dtype, seeds, -3.0, 3.0);
          Tensor b = random_tensor({g.w[0]}, dtype, seeds, -3.0, 3.0);
          OpAttrs attrs;
          attrs.stride = g.stride;
          attrs.padding = g.padding;
          attrs.dilation = g.dilation;
          attrs.groups = g.groups;
          Tensor y = reference(Op::Conv, {x, w, b}, attrs);
          CheckVerdict ok = check("checksum.conv", Op::Conv, {x, w, b}, y, attrs, seed);
          CHECK_MESSAGE(ok.passed, describe(ok));
          CHECK(check("checksum.conv", Op::Conv, {x, w}, reference(Op::Conv, {x, w}, attrs), attrs, seed).passed);
          // Output channel 1 of image 0 is off by 0.05 at every position: above the float32 floor
          // of these geometries (γ_K·conv(|X|, Σ|W|) reaches about 6e-3 for the 5×6 kernel).
          std::vector<double> yv = y.to_vector();
          const std::int64_t plane = y.numel() / (y.dim(0) * y.dim(1));
          for (std::int64_t p = 0; p < plane; ++p) yv[static_cast<std::size_t>(plane + p)] += 0.05;
          CheckVerdict bad = check("checksum.conv", Op::Conv, {x, w, b}, with_values(y, yv), attrs, seed);
          CHECK_MESSAGE(!bad.passed, describe(bad));
        }
      }
    }
  }

  TEST_CASE("conv: the check uses the exact geometry: an output of another geometry with the same shape fails") {
    CheckerRng seeds(42);
    Tensor x = random_tensor({2, 2, 6, 6}, DType::F32, seeds);
    Tensor w = random_tensor({3, 2, 3, 3}, DType::F32, seeds);
    OpAttrs padded;  // padding 1: a 6×6 output
    padded.padding = {1, 1};
    OpAttrs dilated;  // padding 2, dilation 2: also 6×6, other windows
    dilated.padding = {2, 2};
    dilated.dilation = {2, 2};
    Tensor y = reference(Op::Conv, {x, w}, padded);
    CHECK(check("checksum.conv", Op::Conv, {x, w}, y, padded).passed);
    CheckVerdict other = check("checksum.conv", Op::Conv, {x, w}, y, dilated);
    CHECK_FALSE(other.passed);
    CHECK(testing::has(other.worst.what, "checksum residual"));
  }
}

namespace {

/// Tensor::from_values for a runtime list of dims and values.
RuntimeResult<Tensor> from_list(std::vector<std::int64_t> dims, DType dtype, std::vector<double> values) {
  auto shape = Shape::make(dims);
  REQUIRE(shape.has_value());
  return Tensor::from_values(*shape, dtype, values);
}

}  // namespace

// Review findings on the checkers: each case below failed (or hung, or read out of bounds) before
// its fix.
TEST_SUITE("checkers.review") {
  TEST_CASE("attention: a negative finite scale gives a positive bound, so exact outputs pass") {
    CheckerRng seeds(71);
    for (DType dtype : kDTypes) {
      for (std::uint64_t seed = 0; seed < 10; ++seed) {
        Tensor q = random_tensor({4, 6}, dtype, seeds, -3.0, 3.0);
        Tensor k = random_tensor({5, 6}, dtype, seeds, -3.0, 3.0);
        Tensor v = random_tensor({5, 3}, dtype, seeds, -3.0, 3.0);
        OpAttrs attrs;
        attrs.scale = -0.8;
        Tensor out = reference(Op::ScaledDotProductAttention, {q, k, v}, attrs);
        CheckVerdict verdict = check("recompute.attention", Op::ScaledDotProductAttention, {q, k, v}, out, attrs, seed);
        CHECK_MESSAGE(verdict.passed, describe(verdict));
        CHECK(verdict.worst.bound >= 0.0);
      }
    }
  }

  // The recomputation bounds how far the provider's normaliser may move with the score errors
  // err_k: log Σ w_k·e^{err_k}, which bounds both directions. Its first form, the weighted mean
  // Σ w_k·err_k, bounds only the downward one (Jensen), and falls short when one key's score has
  // a large error: large-magnitude operands whose products cancel. Here q = [B, B] and key 0 is
  // [1, -1], so every score is exactly 0 but key 0's may be off by err_0 = γ_3·2B ≈ 3 in float32;
  // a provider whose score for key 0 comes out 0.9·err_0 high is within the model, and its
  // output must pass. Scores of ±2B on another row, where an unshifted exp overflows, must pass
  // when right and fail when an entry is corrupted.
  TEST_CASE("attention: the normaliser's shift bounds a large score error upward, and large scores pass") {
    const double big = 0x1p23;
    const double u = 0x1p-24;
    const double err0 = 3.0 * u / (1.0 - 3.0 * u) * 2.0 * big;  // γ_3 · |scale| · Σ|q||k|
    constexpr std::int64_t kKeys = 10;
    std::vector<double> qv{big, big, big, -big};
    std::vector<double> kv(2 * kKeys, 0.0);
    kv[0] = 1.0, kv[1] = -1.0;
    std::vector<double> vv(kKeys, 1.0);
    vv[0] = 0.0;
    CheckerRng seeds(75);
    Tensor q = with_values(random_tensor({2, 2}, DType::F32, seeds), qv);
    Tensor k = with_values(random_tensor({kKeys, 2}, DType::F32, seeds), kv);
    Tensor v = with_values(random_tensor({kKeys, 1}, DType::F32, seeds), vv);
    OpAttrs attrs;
    attrs.scale = 1.0;
    // Row 1 (q = [B, -B]) scores key 0 at 2B and every other key at 0: far past exp's range.
    Tensor right = reference(Op::ScaledDotProductAttention, {q, k, v}, attrs);
    REQUIRE(right.to_vector()[1] == 0.0);  // all weight on key 0, whose v is 0
    CheckVerdict exact = check("recompute.attention", Op::ScaledDotProductAttention, {q, k, v}, right, attrs);
    CHECK_MESSAGE(exact.passed, describe(exact));

    // Row 0: a provider's score for key 0 off by 0.9·err_0 upward moves every other weight down
    // by the factor 1/(1 - w_0 + w_0·e^{0.9·err_0}), far more than e^{Σ w·err} - 1 allows.
    const double w0 = std::exp(0.9 * err0) / (std::exp(0.9 * err0) + (kKeys - 1));
    std::vector<double> shifted = right.to_vector();
    shifted[0] = 1.0 - w0;
    CHECK(std::fabs(shifted[0] - right.to_vector()[0]) > std::expm1(err0 / kKeys) * right.to_vector()[0]);
    CheckVerdict within = check("recompute.attention", Op::ScaledDotProductAttention, {q, k, v},
                                with_values(right, shifted), attrs);
    CHECK_MESSAGE(within.passed, describe(within));

    // Corruptions of the large-score row are caught: the exact 0 moved to 0.5, or to NaN.
    std::vector<double> corrupt = right.to_vector();
    corrupt[1] = 0.5;
    CheckVerdict moved = check("recompute.attention", Op::ScaledDotProductAttention, {q, k, v},
                               with_values(right, corrupt), attrs);
    CHECK_FALSE(moved.passed);
    CHECK(moved.worst.index == 1);
    corrupt[1] = std::numeric_limits<double>::quiet_NaN();
    CHECK_FALSE(check("recompute.attention", Op::ScaledDotProductAttention, {q, k, v}, with_values(right, corrupt), attrs)
                    .passed);
    // And row 0 beyond what any score error allows (weights can move it, not past 1) fails.
    std::vector<double> beyond = right.to_vector();
    beyond[0] = 5.0;
    CHECK_FALSE(check("recompute.attention", Op::ScaledDotProductAttention, {q, k, v}, with_values(right, beyond), attrs)
                    .passed);
  }

  TEST_CASE("product VJP: a G whose shape the inputs do not give is refused before any read") {
    CheckerRng seeds(72);
    CheckerRng rng(1);
    OpAttrs attrs;
    auto run_vjp = [&](Op op, std::vector<Tensor> inputs, const Tensor& out, const Tensor& g, std::vector<Tensor> grads) {
      CheckCall call{op, inputs, &out, &attrs, &g, grads};
      return check_product_vjp(call, rng, 2);
    };
    // linear: X has 2 rows, G (and the output) 50: dX and X would be read 50 rows deep.
    Tensor x = random_tensor({2, 6}, DType::F32, seeds);
    Tensor w = random_tensor({4, 6}, DType::F32, seeds);
    Tensor g = random_tensor({50, 4}, DType::F32, seeds);
    Tensor dx = random_tensor({2, 6}, DType::F32, seeds);
    Tensor dw = random_tensor({4, 6}, DType::F32, seeds);
    auto rows = run_vjp(Op::Linear, {x, w}, g, g, {dx, dw});
    REQUIRE_FALSE(rows.has_value());
    CHECK(rows.error().code == RuntimeCode::ShapeMismatch);
    CHECK(testing::has(rows.error().message, "output gradient [50, 4]; the inputs give [2, 4]"));
    // linear: a bias of the wrong shape, and a bias gradient for an absent bias.
    Tensor g_ok = random_tensor({2, 4}, DType::F32, seeds);
    Tensor bias3 = random_tensor({3}, DType::F32, seeds);
    auto bias = run_vjp(Op::Linear, {x, w, bias3}, g_ok, g_ok, {dx, dw, bias3});
    REQUIRE_FALSE(bias.has_value());
    CHECK(bias.error().code == RuntimeCode::ShapeMismatch);
    CHECK(testing::has(bias.error().message, "b [3]"));
    auto scalar = Tensor::from_values(Shape::make(std::vector<std::int64_t>{}).value(), DType::F32,
                                      std::vector<double>{0.5});
    REQUIRE(scalar.has_value());
    auto no_bias = run_vjp(Op::Linear, {x, w, Tensor()}, g_ok, g_ok, {dx, dw, *scalar});
    REQUIRE_FALSE(no_bias.has_value());
    CHECK(no_bias.error().code == RuntimeCode::InvalidArgument);
    CHECK(testing::has(no_bias.error().message, "gradient for input 2, which is undefined"));
    // matmul and scaled_matmul: G [3, 9] for A [3, 4]·B [4, 2] would be read as [3, 2] per batch.
    Tensor a = random_tensor({2, 3, 4}, DType::F32, seeds);
    Tensor b = random_tensor({2, 4, 2}, DType::F32, seeds);
    Tensor big = random_tensor({2, 3, 9}, DType::F32, seeds);
    for (Op op : {Op::Matmul, Op::ScaledMatmul}) {
      auto product = run_vjp(op, {a, b}, big, big, {random_tensor({2, 3, 4}, DType::F32, seeds), Tensor()});
      REQUIRE_FALSE(product.has_value());
      CHECK(product.error().code == RuntimeCode::ShapeMismatch);
      CHECK(testing::has(product.error().message, "the inputs give [2, 3, 2]"));
    }
  }

  TEST_CASE("the public check entry points refuse a call without output or attributes") {
    CheckerRng seeds(73);
    CheckerRng rng(1);
    OpAttrs attrs;
    Tensor a = random_tensor({3, 4}, DType::F32, seeds);
    Tensor b = random_tensor({4, 2}, DType::F32, seeds);
    Tensor c = reference(Op::Matmul, {a, b});
    std::vector<Tensor> inputs{a, b};
    CheckCall no_output{Op::Matmul, inputs, nullptr, &attrs, &c, {}};
    CheckCall no_attrs{Op::Matmul, inputs, &c, nullptr, &c, {}};
    for (const CheckCall* call : {&no_output, &no_attrs}) {
      auto product = check_product(*call, rng, 2);
      REQUIRE_FALSE(product.has_value());
      CHECK(product.error().code == RuntimeCode::InvalidArgument);
      CHECK_FALSE(check_product_vjp(*call, rng, 2).has_value());
      CheckCall conv = *call;
      conv.op = Op::Conv;
      auto conv_result = check_conv(conv, rng, 2);
      REQUIRE_FALSE(conv_result.has_value());
      CHECK(testing::has(conv_result.error().message, "no output or no attributes"));
    }
  }

  TEST_CASE("zero-size hostile shapes return at once instead of walking empty lanes or rows") {
    const std::int64_t huge = std::int64_t{1} << 31;
    auto empty = [](std::vector<std::int64_t> dims) {
      auto shape = Shape::make(dims);
      REQUIRE(shape.has_value());
      auto t = Tensor::from_values(*shape, DType::F32, std::vector<double>{});
      REQUIRE(t.has_value());
      return *t;
    };
    Tensor scores = empty({huge, 0, huge});
    OpAttrs middle;
    middle.axis = 1;  // outer = inner = 2^31 lanes of length 0
    CHECK(check("ratio.softmax", Op::Softmax, {scores}, scores, middle).passed);
    CHECK(check("ratio.log_softmax", Op::LogSoftmax, {scores}, scores, middle).passed);
    Tensor q = empty({huge, 0});
    OpAttrs causal;
    causal.causal = true;
    causal.scale = 1.0;  // d = 0 has no default scale
    CHECK(check("recompute.attention", Op::ScaledDotProductAttention, {q, q, q}, q, causal).passed);
    CHECK(check("blocked_rows.attention", Op::ScaledDotProductAttention, {q, q, q}, q, causal).passed);
  }

  TEST_CASE("conv: hostile padding and dilation are a size-overflow error, not signed overflow") {
    CheckerRng seeds(74);
    CheckerRng rng(1);
    Tensor x = random_tensor({1, 2, 5, 5}, DType::F32, seeds);
    Tensor w = random_tensor({3, 2, 3, 3}, DType::F32, seeds);
    Tensor y = random_tensor({1, 3, 3, 3}, DType::F32, seeds);
    const std::int64_t max = std::numeric_limits<std::int64_t>::max();
    OpAttrs padded;
    padded.padding = {max / 2 + 1, 0};
    OpAttrs dilated;
    dilated.dilation = {max, 1};
    OpAttrs groups;
    groups.groups = std::int64_t{1} << 40;  // x [0, 2^40, 5, 5], w [0, 2^30, 3, 3]: w.dim(1)·groups overflowed
    for (const OpAttrs* attrs : {&padded, &dilated}) {
      std::vector<Tensor> inputs{x, w};
      CheckCall call{Op::Conv, inputs, &y, attrs, nullptr, {}};
      auto result = check_conv(call, rng, 2);
      REQUIRE_FALSE(result.has_value());
      CHECK(result.error().code == RuntimeCode::SizeOverflow);
    }
    auto empty = [](std::vector<std::int64_t> dims) {
      auto t = Tensor::from_values(Shape::make(dims).value(), DType::F32, std::vector<double>{});
      REQUIRE(t.has_value());
      return *t;
    };
    std::vector<Tensor> inputs{empty({0, std::int64_t{1} << 40, 5, 5}), empty({0, std::int64_t{1} << 30, 3, 3})};
    CheckCall call{Op::Conv, inputs, &y, &groups, nullptr, {}};
    auto result = check_conv(call, rng, 2);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().code == RuntimeCode::ShapeMismatch);
  }

  TEST_CASE("softmax family: a provider rounding top + log Σ before subtracting passes on large-|top| lanes") {
    // float32 lanes, computed by the provider both as x - top - log Σ and as x - (top + log Σ).
    const std::vector<std::vector<float>> lanes{{1e4f, 1e4f}, {-2e4f, -2e4f + 0.5f, -2e4f}, {3e4f, 3e4f - 1.0f}};
    for (const auto& lane : lanes) {
      std::vector<double> xs(lane.begin(), lane.end());
      float top = lane[0];
      for (float v : lane) top = std::max(top, v);
      float sum = 0.0f;
      for (float v : lane) sum += std::exp(v - top);
      const float log_sum = std::log(sum);
      const float combined = top + log_sum;
      std::vector<double> z_split, z_combined, y_split, y_combined;
      for (float v : lane) {
        z_split.push_back(static_cast<double>((v - top) - log_sum));
        z_combined.push_back(static_cast<double>(v - combined));
        y_split.push_back(static_cast<double>(std::exp((v - top) - log_sum)));
        y_combined.push_back(static_cast<double>(std::exp(v - combined)));
      }
      auto x = from_list({static_cast<std::int64_t>(lane.size())}, DType::F32, xs);
      REQUIRE(x.has_value());
      for (const auto* values : {&z_split, &z_combined}) {
        CheckVerdict v = check("ratio.log_softmax", Op::LogSoftmax, {*x}, with_values(*x, *values));
        CHECK_MESSAGE(v.passed, describe(v));
      }
      for (const auto* values : {&y_split, &y_combined}) {
        CheckVerdict v = check("ratio.softmax", Op::Softmax, {*x}, with_values(*x, *values));
        CHECK_MESSAGE(v.passed, describe(v));
      }
    }
  }

  TEST_CASE("softmax family: a float64 lane whose spread overflows accepts the exact 0 / -inf entry") {
    const double big = 1e308;
    auto x = from_list({2}, DType::F64, std::vector<double>{-big, big});
    REQUIRE(x.has_value());
    const double inf = std::numeric_limits<double>::infinity();
    CheckVerdict soft = check("ratio.softmax", Op::Softmax, {*x}, with_values(*x, {0.0, 1.0}));
    CHECK_MESSAGE(soft.passed, describe(soft));
    CheckVerdict log = check("ratio.log_softmax", Op::LogSoftmax, {*x}, with_values(*x, {-inf, 0.0}));
    CHECK_MESSAGE(log.passed, describe(log));
    CHECK_FALSE(check("ratio.softmax", Op::Softmax, {*x}, with_values(*x, {1e-300, 1.0})).passed);
    CHECK_FALSE(check("ratio.log_softmax", Op::LogSoftmax, {*x}, with_values(*x, {-1e300, 0.0})).passed);
  }

  TEST_CASE("sqrt: a subnormal float64 input's correctly rounded root passes") {
    const double tiny = std::numeric_limits<double>::denorm_min();
    std::vector<double> xs{tiny, 3 * tiny, 7 * tiny, 1001 * tiny, 0x1p-1050};
    std::vector<double> ys;
    for (double v : xs) ys.push_back(std::sqrt(v));
    auto x = from_list({static_cast<std::int64_t>(xs.size())}, DType::F64, xs);
    REQUIRE(x.has_value());
    CheckVerdict v = check("inverse.sqrt", Op::Sqrt, {*x}, with_values(*x, ys));
    CHECK_MESSAGE(v.passed, describe(v));
    ys[2] *= 2.0;  // a wrong root is still caught (y² = 4x)
    CHECK_FALSE(check("inverse.sqrt", Op::Sqrt, {*x}, with_values(*x, ys)).passed);
  }

  TEST_CASE("softmax_matmul: a provider flushing an underflowed weight to 0 passes") {
    // Row 0 of A: the second weight is exp(-100) ~ 3.7e-44, subnormal in float32; B's second row
    // is 1e38, so flushing that weight moves C by ~3.7e-6, far above the relative bound.
    auto a = from_list({1, 2}, DType::F32, std::vector<double>{0.0, -100.0});
    auto b = from_list({2, 1}, DType::F32, std::vector<double>{1.0, 1e38});
    auto flushed = from_list({1, 1}, DType::F32, std::vector<double>{1.0});
    REQUIRE((a.has_value() && b.has_value() && flushed.has_value()));
    CheckVerdict v = check("freivalds.softmax_matmul", Op::SoftmaxMatmul, {*a, *b}, *flushed);
    CHECK_MESSAGE(v.passed, describe(v));
  }
}

TEST_SUITE("checkers") {
  TEST_CASE("the linear checks refuse a call with x alone instead of reading w out of range") {
    CheckerRng source(7);
    const Tensor x = random_tensor({2, 3}, DType::F32, source);
    const Tensor y = random_tensor({2, 4}, DType::F32, source);
    const OpAttrs attrs;
    for (const char* name : {"freivalds.linear", "freivalds.linear.vjp"}) {
      CAPTURE(name);
      const RegisteredChecker* checker = standard_checkers().find(name);
      REQUIRE(checker != nullptr);
      const std::vector<Tensor> only_x{x};
      CheckerRng rng(checker_stream_seed(1, "test", 0));
      CheckCall call{Op::Linear, only_x, &y, &attrs, checker->spec.obligation == Obligation::Vjp ? &y : nullptr, {}};
      auto verdict = run_checker(*checker, call, rng);
      REQUIRE_FALSE(verdict.has_value());
      INFO(verdict.error().message);
      CHECK(testing::has(verdict.error().message, "1 inputs; expected 2 to 3"));
    }
  }
}
