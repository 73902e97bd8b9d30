// SPDX-License-Identifier: Apache-2.0
// capsule_checker_power: the detection power of Freivalds' product check, measured
// (docs/checkers.md, "Detection power, measured"). Not a CTest: it runs for minutes.
//
// 1. False rejections: at least 10^5 correct products (the reference matmul, float32 and float64,
//    most sizes small, n up to 1024), each checked once with the registered checker; every
//    rejection is counted and printed (the stated number is 0). Each is also checked without the
//    screen (FreivaldsTolerance::ExactOnly) on the same signs, and the exact path's largest
//    residual/τ_i is the margin to the tolerance.
// 2. Detection rate above the floor: products perturbed just above the stated floor (2·τ_i, the
//    row's tolerance as docs/checkers.md states it), with 1 and 2 rounds:
//      single  one entry moved by 2.2·τ_i          stated: caught always
//      pair    two entries of a row, +δ and −δ,    stated: ≥ 1 − 2^-R (cancels when the signs agree)
//              |δ| = 2.2·τ_i
//      row     a whole row moved by ±2.2·τ_i/√n    stated: ≥ 1 − 2^-R only if some entry is above 2·τ_i,
//              random signs                        which these are not: measured for information
//    The perturbed products are checked without the screen too.
// 3. The screen's pass rate: the share of rows of correct products that pass on the screen's
//    lower bounds, without the exact tolerance (one-row products, so a verdict is one row's).
// Every call checked both ways must agree (stated: 0 disagreements): the same verdict, and on a
// failure the same row, residual and bound; on a pass a worst residual/bound ratio no smaller
// under the screen (each row's screen bound is at most its τ_i).
// Flags: --products N (per dtype, default 50000), --perturbed N (per kind, default 20000),
//        --seed S.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "capsule/checkers/standard.hpp"
#include "capsule/handlers/reference.hpp"
#include "capsule/runtime/checker.hpp"
#include "capsule/runtime/handler.hpp"

using namespace capsule;

namespace {

struct Options {
  long products = 50000;
  long perturbed = 20000;
  std::uint64_t seed = 1;
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "capsule_checker_power: %s\n", message.c_str());
  std::exit(2);
}

Tensor random_tensor(std::int64_t rows, std::int64_t cols, DType dtype, CheckerRng& rng) {
  auto shape = Shape::make({rows, cols});
  if (!shape) die(shape.error().message);
  std::vector<double> values(static_cast<std::size_t>(rows * cols));
  // Magnitudes over several binades and both signs: cancellation makes rounding relatively large.
  for (double& v : values) {
    const double mantissa = static_cast<double>(rng.next() >> 11) * 0x1p-53;
    v = rng.sign() * mantissa * std::ldexp(1.0, static_cast<int>(rng.below(8)) - 4);
  }
  auto t = Tensor::from_values(*shape, dtype, values);
  if (!t) die(t.error().message);
  return *t;
}

/// A size: most small, some medium, a few up to 1024 (the run stays within minutes).
std::int64_t draw_size(CheckerRng& rng, long index) {
  if (index % 2000 == 0) return 1024;
  if (index % 200 == 1) return 257 + static_cast<std::int64_t>(rng.below(256));
  if (index % 20 == 2) return 33 + static_cast<std::int64_t>(rng.below(224));
  return 1 + static_cast<std::int64_t>(rng.below(32));
}

/// τ_i as docs/checkers.md states it for matmul (α = 1, no bias).
double row_tolerance(const Tensor& a, const Tensor& b, const Tensor& c, std::int64_t i) {
  const std::int64_t k = a.dim(1), n = b.dim(1);
  const double u = a.dtype() == DType::F32 ? 0x1p-24 : 0x1p-53;
  double t = 0.0, c_abs = 0.0;
  for (std::int64_t p = 0; p < k; ++p) {
    double row = 0.0;
    for (std::int64_t q = 0; q < n; ++q) row += std::fabs(b.at(p * n + q));
    t += std::fabs(a.at(i * k + p)) * row;
  }
  for (std::int64_t q = 0; q < n; ++q) c_abs += std::fabs(c.at(i * n + q));
  return freivalds_row_tolerance(u, static_cast<double>(k), k, n, t, c_abs);
}

/// Moves c[index] by `delta`, then at least one more ulp of c's dtype away, so the stored value is
/// at least |delta| from the original.
void move_entry(std::vector<double>& c, std::size_t index, double delta, DType dtype) {
  const double target = c[index] + delta;
  if (dtype == DType::F32) {
    float moved = static_cast<float>(target);
    if (std::fabs(static_cast<double>(moved) - c[index]) < std::fabs(delta)) {
      moved = std::nextafter(moved, delta > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity());
    }
    c[index] = moved;
  } else {
    c[index] = target;
  }
}

struct Tally {
  long trials = 0;
  long caught = 0;
};

/// One matmul call checked with the registered screen and without it, on the same signs.
struct BothWays {
  CheckVerdict screened, exact;
};

BothWays check_both_ways(const Tensor& a, const Tensor& b, const Tensor& c, std::uint64_t stream_seed, int rounds) {
  static const OpAttrs attrs;
  const std::vector<Tensor> inputs{a, b};
  CheckerRng rng(stream_seed);
  CheckerRng exact_rng = rng;
  CheckCall call{Op::Matmul, inputs, &c, &attrs, nullptr, {}};
  auto screened = check_product(call, rng, rounds);
  if (!screened) die(screened.error().message);
  auto exact = check_product(call, exact_rng, rounds, FreivaldsTolerance::ExactOnly);
  if (!exact) die(exact.error().message);
  return {*screened, *exact};
}

/// Whether the screened and the exact verdict of one call disagree (see the header), printing the
/// call when they do.
bool disagree(const CheckVerdict& screened, const CheckVerdict& exact, const char* what) {
  auto ratio = [](const CheckVerdict& v) { return v.worst.bound > 0.0 ? v.worst.residual / v.worst.bound : 0.0; };
  // A failing verdict's residual or bound may be NaN (a NaN residual fails); NaN on both sides is
  // the same verdict, which != would call a disagreement.
  auto differs = [](double a, double b) { return a != b && !(std::isnan(a) && std::isnan(b)); };
  const bool differ = screened.passed != exact.passed ||
                      (!exact.passed && (screened.worst.index != exact.worst.index ||
                                         differs(screened.worst.residual, exact.worst.residual) ||
                                         differs(screened.worst.bound, exact.worst.bound))) ||
                      (exact.passed && ratio(screened) < ratio(exact));
  if (differ) {
    std::printf("  DISAGREE %s: screened %s at %lld (residual %.17g, bound %.17g), exact %s at %lld (residual %.17g, "
                "bound %.17g)\n",
                what, screened.passed ? "passes" : "fails", static_cast<long long>(screened.worst.index),
                screened.worst.residual, screened.worst.bound, exact.passed ? "passes" : "fails",
                static_cast<long long>(exact.worst.index), exact.worst.residual, exact.worst.bound);
  }
  return differ;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> long {
      if (i + 1 >= argc) die(arg + " needs a value");
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || v < 0) die(arg + ": expected a non-negative integer");
      return v;
    };
    if (arg == "--products") options.products = value();
    else if (arg == "--perturbed") options.perturbed = value();
    else if (arg == "--seed") options.seed = static_cast<std::uint64_t>(value());
    else die("unknown flag " + arg + " (known: --products N, --perturbed N, --seed S)");
  }
  HandlerRegistry handlers;
  if (auto status = register_reference_handlers(handlers); !status) die(status.error().message);
  const HandlerSpec& matmul = handlers.find(Op::Matmul, Provider::Reference, Device::Cpu)->spec;
  const OpAttrs attrs;
  CheckerRng sizes(options.seed);
  const auto start = std::chrono::steady_clock::now();

  std::printf("False rejections: correct reference products, %d rounds each\n", kFreivaldsRounds);
  long total_products = 0, total_rejected = 0, total_disagreements = 0;
  for (DType dtype : {DType::F32, DType::F64}) {
    long rejected = 0, large = 0, disagreements = 0;
    double closest = 0.0;  // the largest residual/τ_i a correct product reached (exact path)
    for (long index = 0; index < options.products; ++index) {
      const std::int64_t m = draw_size(sizes, index), k = draw_size(sizes, index), n = draw_size(sizes, index);
      large += (m >= 1024 ? 1 : 0);
      std::vector<Tensor> inputs{random_tensor(m, k, dtype, sizes), random_tensor(k, n, dtype, sizes)};
      auto c = matmul.forward(inputs, attrs);
      if (!c) die(c.error().message);
      const BothWays both = check_both_ways(
          inputs[0], inputs[1], *c,
          checker_stream_seed(options.seed, "power.correct", static_cast<std::uint64_t>(index)), kFreivaldsRounds);
      const CheckVerdict& verdict = both.screened;
      const CheckVerdict& exact = both.exact;
      if (exact.worst.bound > 0.0) closest = std::max(closest, exact.worst.residual / exact.worst.bound);
      if (disagree(verdict, exact, "a correct product")) ++disagreements;
      if (!verdict.passed) {
        ++rejected;
        std::printf("  REJECTED %s %lldx%lldx%lld: %s %lld residual %.3g bound %.3g\n", std::string(to_string(dtype)).c_str(),
                    static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
                    verdict.worst.what.c_str(), static_cast<long long>(verdict.worst.index), verdict.worst.residual,
                    verdict.worst.bound);
      }
    }
    std::printf("  %s: %ld products (%ld with a 1024 dimension), %ld rejected; largest residual/tau_i %.3g; "
                "%ld screened/exact disagreements\n",
                std::string(to_string(dtype)).c_str(), options.products, large, rejected, closest, disagreements);
    total_products += options.products;
    total_rejected += rejected;
    total_disagreements += disagreements;
  }
  std::printf("  total: %ld products, %ld false rejections (stated: 0), %ld disagreements (stated: 0)\n\n",
              total_products, total_rejected, total_disagreements);

  std::printf("Detection above the floor (2·tau_i), sizes 1..64, per call\n");
  std::printf("  %-7s %-7s %6s %9s %9s %9s\n", "kind", "dtype", "rounds", "trials", "detected", "stated");
  bool below_stated = false;
  long perturbed_disagreements = 0;
  for (const char* kind : {"single", "pair", "row"}) {
    for (DType dtype : {DType::F32, DType::F64}) {
      for (int rounds : {1, 2}) {
        Tally tally;
        for (long trial = 0; trial < options.perturbed; ++trial) {
          const std::int64_t m = 1 + static_cast<std::int64_t>(sizes.below(64));
          const std::int64_t k = 1 + static_cast<std::int64_t>(sizes.below(64));
          const std::int64_t n = 2 + static_cast<std::int64_t>(sizes.below(63));
          std::vector<Tensor> inputs{random_tensor(m, k, dtype, sizes), random_tensor(k, n, dtype, sizes)};
          auto c = matmul.forward(inputs, attrs);
          if (!c) die(c.error().message);
          std::vector<double> values = c->to_vector();
          const std::int64_t i = static_cast<std::int64_t>(sizes.below(static_cast<std::uint64_t>(m)));
          const double tau = row_tolerance(inputs[0], inputs[1], *c, i);
          const std::size_t row = static_cast<std::size_t>(i * n);
          if (std::strcmp(kind, "single") == 0) {
            move_entry(values, row + sizes.below(static_cast<std::uint64_t>(n)), sizes.sign() * 2.2 * tau, dtype);
          } else if (std::strcmp(kind, "pair") == 0) {
            const std::size_t j0 = sizes.below(static_cast<std::uint64_t>(n));
            const std::size_t j1 = (j0 + 1 + sizes.below(static_cast<std::uint64_t>(n - 1))) % static_cast<std::size_t>(n);
            const double delta = sizes.sign() * 2.2 * tau;
            move_entry(values, row + j0, delta, dtype);
            move_entry(values, row + j1, -delta, dtype);
          } else {
            const double delta = 2.2 * tau / std::sqrt(static_cast<double>(n));
            for (std::int64_t j = 0; j < n; ++j) move_entry(values, row + static_cast<std::size_t>(j), sizes.sign() * delta, dtype);
          }
          auto bad = Tensor::from_values(c->shape(), dtype, values);
          if (!bad) die(bad.error().message);
          const BothWays both = check_both_ways(inputs[0], inputs[1], *bad,
                                                checker_stream_seed(options.seed, kind, static_cast<std::uint64_t>(trial)),
                                                rounds);
          if (disagree(both.screened, both.exact, kind)) ++perturbed_disagreements;
          ++tally.trials;
          tally.caught += both.screened.passed ? 0 : 1;
        }
        const double rate = static_cast<double>(tally.caught) / static_cast<double>(tally.trials);
        const bool single = std::strcmp(kind, "single") == 0;
        const bool informational = std::strcmp(kind, "row") == 0;
        const double stated = single ? 1.0 : 1.0 - std::ldexp(1.0, -rounds);
        // 4 standard deviations of a binomial at the stated rate: a shortfall beyond it is real.
        const double slack = 4.0 * std::sqrt(stated * (1.0 - stated) / static_cast<double>(tally.trials));
        if (!informational && rate + slack < stated) below_stated = true;
        std::printf("  %-7s %-7s %6d %9ld %9.4f %9s\n", kind, std::string(to_string(dtype)).c_str(), rounds, tally.trials,
                    rate, informational ? "-" : (single ? "1" : (rounds == 1 ? ">=0.5" : ">=0.75")));
      }
    }
  }
  std::printf("  screened/exact disagreements on the perturbed products: %ld (stated: 0)\n", perturbed_disagreements);
  total_disagreements += perturbed_disagreements;

  // A row passes on the screen exactly when the one-row product's screened bound is below the
  // exact τ_i: τ_i adds the check's own positive terms to the screen's bound, and a row the screen
  // does not pass reports τ_i itself.
  std::printf("\nThe screen's pass rate: rows of correct products passing on its lower bounds (1 x k x n)\n");
  std::printf("  %-7s %6s %9s %9s\n", "dtype", "k = n", "rows", "screened");
  for (DType dtype : {DType::F32, DType::F64}) {
    for (std::int64_t size : {4, 16, 64, 256, 1024}) {
      const long rows = size >= 1024 ? 200 : 2000;
      long screened = 0;
      for (long trial = 0; trial < rows; ++trial) {
        std::vector<Tensor> inputs{random_tensor(1, size, dtype, sizes), random_tensor(size, size, dtype, sizes)};
        auto c = matmul.forward(inputs, attrs);
        if (!c) die(c.error().message);
        const BothWays both = check_both_ways(
            inputs[0], inputs[1], *c,
            checker_stream_seed(options.seed, "power.screen", static_cast<std::uint64_t>(trial)), kFreivaldsRounds);
        if (!both.screened.passed || !both.exact.passed) die("the screen's pass rate: a correct product failed");
        screened += both.screened.worst.bound < both.exact.worst.bound ? 1 : 0;
      }
      std::printf("  %-7s %6lld %9ld %9.4f\n", std::string(to_string(dtype)).c_str(), static_cast<long long>(size), rows,
                  static_cast<double>(screened) / static_cast<double>(rows));
    }
  }
  const bool pass = total_rejected == 0 && total_disagreements == 0 && !below_stated;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n%.1f s. %s\n", seconds,
              pass ? "PASS: no false rejection, no screened/exact disagreement, every rate at least the stated one"
                   : "FAIL");
  return pass ? 0 : 1;
}
