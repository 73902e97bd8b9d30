// SPDX-License-Identifier: Apache-2.0
#include "recheck.hpp"

#include "capsule/known_checker.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <vector>

#include "capsule/capsule.hpp"
#include "capsule/environment_report.hpp"
#include "capsule/json.hpp"
#include "capsule/runtime/message_style.hpp"
#include "capsule/text.hpp"

namespace capsule {
namespace {

std::string checker_subject(const Capsule& capsule, Obligation obligation, std::string_view checker) {
  return str("capsule `", capsule.name, "` (op `", to_string(capsule.op), "`, device `", to_string(capsule.device),
             "`): its ", to_string(obligation), " evidence names checker `", checker, "`");
}

/// A domain tag mixed into the sampling seed, so the stream that picks the checked calls is
/// never the stream the checker itself draws from for the same call.
constexpr std::uint64_t kSamplingDomain = 0x5a4d504c45525348ULL;  // "ZMPLERSH"

/// Writes `bytes` to a new file `name` in `dir` (a directory this bundle created): O_EXCL and
/// O_NOFOLLOW, so nothing existing is replaced and no link is followed.
std::string write_new_file(const std::filesystem::path& dir, std::string_view name, const void* bytes,
                           std::size_t size) {
  const std::filesystem::path file = dir / std::string(name);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return str("cannot create `", file.string(), "`: ", std::strerror(errno));
  const auto* p = static_cast<const char*>(bytes);
  std::size_t left = size;
  while (left > 0) {
    const ssize_t wrote = ::write(fd, p, left);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      const std::string reason = std::strerror(errno);
      ::close(fd);
      return str("cannot write `", file.string(), "`: ", reason);
    }
    p += wrote;
    left -= static_cast<std::size_t>(wrote);
  }
  if (::close(fd) != 0) return str("cannot close `", file.string(), "`: ", std::strerror(errno));
  return {};
}

/// The tensor's elements as little-endian bytes of its dtype.
std::vector<unsigned char> little_endian_bytes(const Tensor& tensor) {
  const std::size_t width = element_size(tensor.dtype());
  const std::size_t count = static_cast<std::size_t>(tensor.numel());
  std::vector<unsigned char> out(width * count);
  if (count == 0) return out;
  std::memcpy(out.data(), tensor.data<unsigned char>(), out.size());
  if constexpr (std::endian::native == std::endian::big) {
    for (std::size_t i = 0; i < count; ++i) {
      for (std::size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap(out[i * width + a], out[i * width + b]);
    }
  }
  return out;
}

std::string safe_component(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, 80)) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
    out += keep ? c : '_';
  }
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  return out;
}

void write_attrs(JsonWriter& json, const OpAttrs& a) {
  auto ints = [&](std::string_view key, const std::vector<std::int64_t>& v) {
    json.key(key).begin_array();
    for (std::int64_t x : v) json.value(x);
    json.end_array();
  };
  json.begin_object();
  ints("shape", a.shape);
  ints("axes", a.axes);
  ints("indices", a.indices);
  ints("kernel", a.kernel);
  ints("stride", a.stride);
  ints("padding", a.padding);
  ints("dilation", a.dilation);
  ints("output_padding", a.output_padding);
  json.field("axis", a.axis).field("start", a.start).field("end", a.end).field("groups", a.groups).field("k", a.k);
  json.field("alpha", a.alpha).field("lo", a.lo).field("hi", a.hi).field("eps", a.eps);
  json.field("temperature", a.temperature).field("p", a.p).field("scale", a.scale);
  json.field("seed", std::string_view(str(a.seed)));  // a string: JSON numbers lose 64-bit integers
  json.field("dtype", to_string(a.dtype)).field("keepdim", a.keepdim).field("causal", a.causal);
  json.end_object();
}

}  // namespace

RuntimeResult<const RegisteredChecker*> bind_checker(const Capsule& capsule, Obligation obligation,
                                                     const CheckerRegistry* registry) {
  const Evidence& evidence = capsule.contract(obligation).evidence;
  if (evidence.kind != EvidenceKind::Checker) return static_cast<const RegisteredChecker*>(nullptr);
  const std::string subject = checker_subject(capsule, obligation, evidence.name);
  if (registry == nullptr) {
    return runtime_error(RuntimeCode::BindingRejected,
                         str(kTorchLeanBackendPrefix, "invalid checker binding: ", subject,
                             ", but the session was opened without a checker registry; a check is never skipped"));
  }
  const RegisteredChecker* checker = registry->find(evidence.name);
  if (checker == nullptr) {
    std::string message = str(kTorchLeanBackendPrefix, "invalid checker binding: ", subject, ", which is not registered");
    std::vector<std::string_view> names;
    for (const RegisteredChecker* c : registry->all()) names.push_back(c->spec.name);
    if (std::string near = nearest_name(evidence.name, names); !near.empty()) {
      message += str("; did you mean `", near, "`?");
    }
    return runtime_error(RuntimeCode::BindingRejected, std::move(message));
  }
  // The comparison lint, plan and check make (capsule/known_checker.hpp), so the session refuses
  // exactly what they report.
  const CheckerSpec& spec = checker->spec;
  const KnownChecker known{spec.name, spec.op, spec.device, spec.coverage, spec.obligation, {}};
  const CheckerJudgement judgement = judge_checker_evidence(capsule, obligation, std::span(&known, 1));
  if (judgement.verdict == CheckerJudgement::Verdict::Mismatch) {
    return runtime_error(RuntimeCode::BindingRejected,
                         str(kTorchLeanBackendPrefix, "invalid checker binding: ", subject, " with coverage `",
                             to_string(evidence.claimed_coverage.value_or(evidence.coverage)), "`, registered at ",
                             checker->site, " for op `",
                             to_string(spec.op), "` on device `", to_string(spec.device), "` (", to_string(spec.obligation),
                             ") with coverage `", to_string(spec.coverage), "`: ",
                             join(judgement.disagreements, "; ")));
  }
  return checker;
}

std::string recheck_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

bool recheck_selects(const RecheckPolicy& policy, std::string_view capsule, std::uint64_t call_index) {
  if (policy.kind == RecheckPolicy::Kind::Every) return policy.every <= 1 || call_index % policy.every == 0;
  if (!(policy.sample > 0.0)) return false;
  if (policy.sample >= 1.0) return true;
  CheckerRng rng(checker_stream_seed(policy.seed ^ kSamplingDomain, capsule, call_index));
  // 53 random bits: a uniform draw in [0, 1).
  const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
  return u < policy.sample;
}

std::string recheck_policy_text(const RecheckPolicy& policy) {
  if (policy.kind == RecheckPolicy::Kind::Every) {
    return policy.every <= 1 ? std::string("every call") : str("every ", policy.every, " calls");
  }
  return str("sample p=", recheck_number(policy.sample), " seed=", policy.seed);
}

Result<std::filesystem::path, std::string> write_repro_bundle(const std::filesystem::path& parent,
                                                             const ReproBundle& bundle) {
  const Capsule& capsule = *bundle.capsule;
  const CheckCall& call = *bundle.call;
  std::error_code error;
  if (!std::filesystem::is_directory(parent, error)) {
    return fail(str("the reproduction directory `", parent.string(), "` does not exist or is not a directory"));
  }
  const std::string stem = str("capsule-recheck-", safe_component(capsule.name), "-", to_string(bundle.obligation),
                               "-call", bundle.call_index);
  std::filesystem::path dir;
  for (int attempt = 0;; ++attempt) {
    if (attempt == 1000) return fail(str("no free bundle name `", stem, "-N` under `", parent.string(), "`"));
    dir = parent / (attempt == 0 ? stem : str(stem, "-", attempt));
    // mkdir never follows or replaces what is there: an existing name (file, link, directory)
    // makes it fail, and the next suffix is tried.
    if (::mkdir(dir.c_str(), 0755) == 0) break;
    if (errno != EEXIST) return fail(str("cannot create `", dir.string(), "`: ", std::strerror(errno)));
  }

  JsonWriter json;
  json.begin_object().field("format", std::string_view("capsule-recheck-bundle/1"));
  json.field("capsule", std::string_view(capsule.name))
      .field("op", to_string(capsule.op))
      .field("provider", to_string(capsule.provider))
      .field("device", to_string(capsule.device))
      .field("obligation", to_string(bundle.obligation))
      .field("call_index", static_cast<std::int64_t>(bundle.call_index));
  json.key("attrs");
  if (call.attrs != nullptr) {
    write_attrs(json, *call.attrs);
  } else {
    json.null();
  }
  json.key("checker")
      .begin_object()
      .field("name", std::string_view(bundle.checker->spec.name))
      .field("coverage", to_string(bundle.checker->spec.coverage))
      .field("summary", std::string_view(bundle.checker->spec.summary))
      .end_object();
  const CheckViolation& worst = bundle.verdict->worst;
  json.key("verdict")
      .begin_object()
      .field("passed", bundle.verdict->passed)
      .field("residual", worst.residual)
      .field("residual_text", std::string_view(recheck_number(worst.residual)))
      .field("bound", worst.bound)
      .field("index", static_cast<std::int64_t>(worst.index))
      .field("what", std::string_view(worst.what))
      .end_object();
  json.field("policy", std::string_view(recheck_policy_text(*bundle.policy)));
  // write_environment_json writes its own `environment` key, as in every report.
  if (bundle.fingerprint != nullptr) {
    write_environment_json(json, *bundle.fingerprint);
  } else {
    json.key("environment").null();
  }

  struct Entry {
    std::string role;
    const Tensor* tensor;
  };
  std::vector<Entry> entries;
  for (std::size_t i = 0; i < call.inputs.size(); ++i) entries.push_back({str("input", i), &call.inputs[i]});
  if (call.output != nullptr) entries.push_back({"output", call.output});
  if (call.output_gradient != nullptr) entries.push_back({"output_gradient", call.output_gradient});
  for (std::size_t i = 0; i < call.input_gradients.size(); ++i) {
    entries.push_back({str("input_gradient", i), &call.input_gradients[i]});
  }
  json.key("tensors").begin_array();
  for (const Entry& entry : entries) {
    const Tensor& t = *entry.tensor;
    json.begin_object().field("role", std::string_view(entry.role));
    if (!t.defined() || t.device() != Device::Cpu) {
      json.field("file", false).field("note", std::string_view(t.defined() ? "not on the cpu" : "undefined"));
      json.end_object();
      continue;
    }
    const std::string file = entry.role + ".bin";
    const std::vector<unsigned char> bytes = little_endian_bytes(t);
    if (std::string failed = write_new_file(dir, file, bytes.data(), bytes.size()); !failed.empty()) return fail(failed);
    json.field("file", std::string_view(file)).field("dtype", to_string(t.dtype()));
    json.key("shape").begin_array();
    for (std::int64_t d : t.shape().dims()) json.value(d);
    json.end_array().field("byte_order", std::string_view("little")).end_object();
  }
  json.end_array().end_object();
  const std::string manifest = json.str() + "\n";
  if (std::string failed = write_new_file(dir, "manifest.json", manifest.data(), manifest.size()); !failed.empty()) {
    return fail(failed);
  }
  return dir;
}

}  // namespace capsule
