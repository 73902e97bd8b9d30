// SPDX-License-Identifier: Apache-2.0
// causal_attention: TorchLean §10.15. Hard masking gives a blocked key exactly zero weight and a
// fully blocked row all zeros; the common trick of replacing blocked scores with a finite
// sentinel before a plain softmax leaks weight onto blocked keys (about 3.4e-14 with -30) and
// turns a fully blocked row into a uniform one. Every number here is computed by session calls.
#include "capsule/escape.hpp"
#include "capsule/text.hpp"
#include "common.hpp"

namespace capsule::examples::detail {
namespace {

constexpr std::int64_t kN = 3;

/// Rows of a [r, c] tensor.
std::vector<std::vector<double>> rows_of(const Tensor& t) {
  const std::vector<double> flat = t.to_vector();
  const auto cols = static_cast<std::size_t>(t.dim(t.rank() - 1));
  std::vector<std::vector<double>> rows;
  for (std::size_t at = 0; at + cols <= flat.size(); at += cols) {
    rows.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(at),
                      flat.begin() + static_cast<std::ptrdiff_t>(at + cols));
  }
  return rows;
}

RuntimeResult<Var> matrix(Session& session, std::int64_t rows, std::int64_t cols, std::span<const double> values) {
  CAPSULE_TRY(const Shape shape, Shape::make({rows, cols}));
  CAPSULE_TRY(Tensor tensor, Tensor::from_values(shape, DType::F64, values));
  return session.constant(std::move(tensor));
}

/// softmax over `scores` with every blocked entry (mask 0) replaced by `sentinel`:
/// scores·mask + sentinel·(1 - mask), then the plain softmax op.
RuntimeResult<Var> sentinel_softmax(Session& session, const Var& scores, const Var& mask, double sentinel) {
  CAPSULE_TRY(Tensor ones_tensor, Tensor::full(mask.shape(), DType::F64, 1.0));
  const Var ones = session.constant(std::move(ones_tensor));
  CAPSULE_TRY(const Var kept, session.call(Op::Mul, {scores, mask}));
  CAPSULE_TRY(const Var blocked, session.call(Op::Sub, {ones, mask}));
  OpAttrs fill;
  fill.alpha = sentinel;
  CAPSULE_TRY(const Var penalty, session.call(Op::Scale, {blocked}, fill));
  CAPSULE_TRY(const Var filled, session.call(Op::Add, {kept, penalty}));
  return session.call(Op::Softmax, {filled});
}

void json_rows(JsonWriter& json, std::string_view key, const Tensor& t) {
  json.key(key).begin_array();
  for (const auto& row : rows_of(t)) {
    json.begin_array();
    for (const double v : row) json.value(v);
    json.end_array();
  }
  json.end_array();
}

}  // namespace

RuntimeStatus causal_attention(const Run& run) {
  const std::vector<Op> ops{Op::HardMaskedSoftmax, Op::Mul,     Op::Sub, Op::Scale,
                            Op::Add,               Op::Softmax, Op::ScaledDotProductAttention};
  // Inference only: the session plans with VJP mode none, as TorchLean's eager forward does.
  CAPSULE_TRY(Session session, open_session(run, ops, false));

  const std::vector<double> score_values{1, 2, 3, 0.5, 0, -0.5, 2, 2, 2};
  std::vector<double> causal(static_cast<std::size_t>(kN * kN));
  for (std::int64_t i = 0; i < kN; ++i) {
    for (std::int64_t j = 0; j < kN; ++j) causal[static_cast<std::size_t>(i * kN + j)] = j <= i ? 1.0 : 0.0;
  }
  CAPSULE_TRY(const Var scores, matrix(session, kN, kN, score_values));
  CAPSULE_TRY(const Var mask, matrix(session, kN, kN, causal));
  OpAttrs last_axis;
  last_axis.axis = -1;
  CAPSULE_TRY(const Var hard, session.call(Op::HardMaskedSoftmax, {scores, mask}, last_axis));

  // A fully blocked row: hard masking leaves it all zeros, a finite sentinel makes it uniform.
  const std::vector<double> row_scores{1, 2, 3};
  const std::vector<double> row_blocked{0, 0, 0};
  CAPSULE_TRY(const Var row, matrix(session, 1, kN, row_scores));
  CAPSULE_TRY(const Var row_mask, matrix(session, 1, kN, row_blocked));
  CAPSULE_TRY(const Var row_hard, session.call(Op::HardMaskedSoftmax, {row, row_mask}, last_axis));
  CAPSULE_TRY(const Var row_sentinel, sentinel_softmax(session, row, row_mask, -30.0));

  // The leak: weight (0, 2) is a blocked key of row 0.
  CAPSULE_TRY(const Var leak30, sentinel_softmax(session, scores, mask, -30.0));
  CAPSULE_TRY(const Var leak1e30, sentinel_softmax(session, scores, mask, -1e30));
  const double w30 = leak30.value().at(2);
  const double w1e30 = leak1e30.value().at(2);
  const double w_hard = hard.value().at(2);

  // Causal scaled dot-product attention on a tiny q, k, v [3, 2].
  const std::vector<double> q_values{1, 0, 0, 1, 1, 1};
  const std::vector<double> k_values{1, 0, 0, 1, 1, -1};
  const std::vector<double> v_values{1, 2, 3, 4, 5, 6};
  CAPSULE_TRY(const Var q, matrix(session, kN, 2, q_values));
  CAPSULE_TRY(const Var k, matrix(session, kN, 2, k_values));
  CAPSULE_TRY(const Var v, matrix(session, kN, 2, v_values));
  OpAttrs attention;
  attention.causal = true;
  CAPSULE_TRY(const Var attended, session.call(Op::ScaledDotProductAttention, {q, k, v}, attention));

  if (run.options.json) {
    JsonWriter json;
    json.begin_document().field("example", "causal_attention").field("profile", run.options.profile);
    json.key("values").begin_object();
    json_rows(json, "scores", scores.value());
    json_rows(json, "hard_masked_softmax", hard.value());
    json.key("fully_blocked_row").begin_object();
    json_rows(json, "hard_masked_softmax", row_hard.value());
    json_rows(json, "sentinel_minus_30", row_sentinel.value());
    json.end_object();
    json.key("blocked_weight_0_2").begin_object().field("sentinel_minus_30", w30).field("sentinel_minus_1e30", w1e30)
        .field("hard_masked_softmax", w_hard).end_object();
    json_rows(json, "causal_attention_output", attended.value());
    json.end_object();
    close_json(json, session, run);
    run.out << json.str() << "\n";
    return std::monostate{};
  }

  std::ostream& out = run.out;
  CAPSULE_TRY(const std::string header,
              report_header(run, "causal_attention", "hard-masked causal softmax and attention (TorchLean §10.15)",
                            "3x3 scores under a causal mask; a fully blocked row; the leak of a finite sentinel; "
                            "causal scaled dot-product attention (inference, no gradients)",
                            ops, "the ops the example dispatches"));
  out << header;
  out << "scores:\n";
  for (const auto& r : rows_of(scores.value())) out << "  " << fixed_row(r) << "\n";
  out << "hard_masked_softmax with the causal mask (key j allowed iff j <= i):\n";
  for (const auto& r : rows_of(hard.value())) out << "  " << fixed_row(r) << "\n";
  out << "\na fully blocked row (scores [1, 2, 3], every key masked):\n"
      << "  hard_masked_softmax:          " << fixed_row(rows_of(row_hard.value()).front()) << "\n"
      << "  softmax with sentinel -30:    " << fixed_row(rows_of(row_sentinel.value()).front()) << "\n";
  out << "\nleak onto a blocked key: weight (0, 2) x 1e12\n"
      << "  softmax with sentinel -30:    " << fixed(w30 * 1e12) << "   (weight " << str(w30) << ")\n"
      << "  softmax with sentinel -1e30:  " << fixed(w1e30 * 1e12) << "\n"
      << "  hard_masked_softmax:          " << fixed(w_hard * 1e12) << "   (" << (w_hard == 0.0 ? "exactly 0" : "not 0")
      << ")\n";
  out << "\nscaled_dot_product_attention, causal, q k v [3, 2]:\n";
  for (const auto& r : rows_of(attended.value())) out << "  " << fixed_row(r) << "\n";
  out << "\n" << capsules_used_and_copies(session, run);
  return std::monostate{};
}

}  // namespace capsule::examples::detail
