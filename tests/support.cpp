// SPDX-License-Identifier: Apache-2.0
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>
#include <stdexcept>

#include "capsule/handlers/reference.hpp"
#include "capsule/text.hpp"
#include "suite_coverage.hpp"

namespace capsule::testing {

const Capsule& shipped_capsule(std::string_view name) {
  for (const ModulePtr& module : shipped().modules) {
    for (const Capsule& c : module->capsules) {
      if (c.name == name) return c;
    }
  }
  FAIL("no shipped capsule " << name);
  throw std::logic_error("unreachable");
}

ModulePtr shipped_module(std::string_view name) {
  for (const ModulePtr& m : shipped().modules) {
    if (m->name == name) return m;
  }
  FAIL("no shipped module " << name);
  throw std::logic_error("unreachable");
}

ResolvedProfile shipped_profile(std::string_view name) {
  ProfilePtr profile = shipped().find_profile(name);
  REQUIRE_MESSAGE(profile != nullptr, "no shipped profile " << name);
  auto resolved = resolve_profile(shipped(), profile);
  REQUIRE_MESSAGE(resolved.has_value(), "profile " << name << " does not resolve");
  return std::move(*resolved);
}

CliRun run_cli(std::vector<std::string> args, const cli::Environment& env) {
  std::ostringstream out;
  std::ostringstream err;
  CliRun run;
  run.status = cli::run(args, out, err, env);
  run.out = out.str();
  run.err = err.str();
  if (run.err.starts_with("capsule: catalogs: ")) {
    const std::size_t end = run.err.find('\n');
    run.data = run.err.substr(0, end);
    run.err.erase(0, end == std::string::npos ? std::string::npos : end + 1);
  }
  return run;
}

CliRun run_shipped_cli(std::vector<std::string> args, const cli::Environment& env) {
  args.push_back("--catalogs");
  args.push_back((source_dir() / "catalogs").string());
  args.push_back("--profiles");
  args.push_back((source_dir() / "profiles").string());
  return run_cli(std::move(args), env);
}

std::string mask_digests(std::string text) {
  // A plain scan rather than <regex>: libstdc++'s regex trips -Wmaybe-uninitialized under the
  // sanitizer build.
  const auto is_hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t run = 0;
    while (i + run < text.size() && is_hex(text[i + run])) ++run;
    if (run == 64) {
      out += "<sha256>";
    } else {
      out.append(text, i, run == 0 ? 1 : run);
    }
    i += run == 0 ? 1 : run;
  }
  return out;
}

EnvironmentFingerprint fixed_fingerprint() {
  EnvironmentFingerprint fingerprint;
  fingerprint.set(std::string(fingerprint_key::kCommit), "0123456789abcdef0123456789abcdef01234567");
  fingerprint.set(std::string(fingerprint_key::kHostOs), "TestOS 1.0");
  fingerprint.set(fingerprint_key::environment_variable("OPENBLAS_CORETYPE"), "unset");
  return fingerprint;
}

cli::Environment golden_environment() {
  cli::Environment env;
  env.fingerprint = fixed_fingerprint();
  return env;
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

const HandlerRegistry& reference_handlers() {
  static const HandlerRegistry registry = [] {
    HandlerRegistry r;
    auto status = register_reference_handlers(r);
    REQUIRE_MESSAGE(status.has_value(), (status ? std::string() : status.error().message));
    return r;
  }();
  return registry;
}

namespace {

/// The op `--tamper-op` corrupts, and a copy of its handler whose forward does.
struct Tampering {
  std::optional<Op> op;
  ForwardKernel original = nullptr;
  HandlerSpec spec;
};

Tampering& tampering() {
  static Tampering instance;
  return instance;
}

RuntimeResult<Tensor> tampered_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  RuntimeResult<Tensor> out = tampering().original(inputs, attrs);
  if (!out || out->numel() == 0) return out;
  RuntimeResult<Tensor> copy = out->clone();
  if (!copy) return copy;
  if (copy->dtype() == DType::F32) copy->mutable_data<float>()[0] += 1.0F;
  else copy->mutable_data<double>()[0] += 1.0;
  return copy;
}

}  // namespace

std::optional<std::string> tamper_reference_op(std::string_view name) {
  // Only parsed here: the registry is built (and checked with doctest assertions) inside a test.
  auto op = parse<Op>(name);
  if (!op) return op.error().message;
  if (!requires_vjp(*op) || *op == Op::Custom) return str("`", name, "` is not an op whose values the tamper test checks");
  tampering().op = *op;
  return std::nullopt;
}

const HandlerSpec& reference_handler(Op op) {
  const RegisteredHandler* h = reference_handlers().find(op, Provider::Reference, Device::Cpu);
  REQUIRE_MESSAGE(h != nullptr, "no reference handler for " << to_string(op));
  record_exercised(op, Provider::Reference, Device::Cpu);
  Tampering& t = tampering();
  if (t.op != op) return h->spec;
  if (t.original == nullptr) {
    REQUIRE_MESSAGE((h->spec.forward != nullptr), "--tamper-op: no reference forward kernel for " << to_string(op));
    t.original = h->spec.forward;
    t.spec = h->spec;
    t.spec.forward = tampered_forward;
  }
  return t.spec;
}

ScratchTree::ScratchTree(std::string_view name) {
  root_ = std::filesystem::temp_directory_path() / str("capsule-test-", name, "-", ::getpid());
  std::filesystem::remove_all(root_);
  std::filesystem::create_directories(root_);
  std::filesystem::copy(source_dir() / "catalogs", catalogs());
  std::filesystem::copy(source_dir() / "profiles", profiles());
  // The files the shipped catalogs' provenance names, so lint of the copy finds them.
  for (const char* provider : {"libtorch", "cuda"}) {
    std::filesystem::create_directories(root_ / "handlers" / provider);
    std::filesystem::copy(source_dir() / "handlers" / provider / "src", root_ / "handlers" / provider / "src");
  }
}

ScratchTree::~ScratchTree() {
  std::error_code ignored;
  std::filesystem::remove_all(root_, ignored);
}

void ScratchTree::write(const std::filesystem::path& relative, std::string_view text) const {
  std::ofstream(root_ / relative) << text;
}

void ScratchTree::replace(const std::filesystem::path& relative, std::string_view from, std::string_view to) const {
  std::string text = read_text(root_ / relative);
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "`", std::string(from), "` is not in ", relative.string());
  text.replace(at, from.size(), to);
  write(relative, text);
}

Workspace ScratchTree::load() const { return load_workspace({catalogs()}, {profiles()}); }

}  // namespace capsule::testing
