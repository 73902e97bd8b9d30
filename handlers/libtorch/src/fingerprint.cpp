// SPDX-License-Identifier: Apache-2.0
// The LibTorch provider's entries of the environment fingerprint (docs/fingerprint.md): what the
// loaded LibTorch says it was built with, the BLAS its matrix products really call, that BLAS's
// core type, ATen's kernel level and its intra-op threads. Everything is read from the running
// process, not from what happens to be installed: Debian's LibTorch reports BLAS_INFO=generic and
// calls `sgemm_` of whatever libblas.so.3 the alternatives system points at (reference BLAS,
// OpenBLAS, BLIS…), so the library that defines `sgemm_` for LibTorch is the one named.
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "capsule/handlers/libtorch.hpp"
#include "capsule/text.hpp"

namespace capsule {
namespace {

/// The value after `marker` in `config` up to the first of `ends` (trimmed), or "".
std::string config_value(std::string_view config, std::string_view marker, std::string_view ends) {
  const std::size_t at = config.find(marker);
  if (at == std::string_view::npos) return {};
  std::string_view rest = config.substr(at + marker.size());
  rest = rest.substr(0, rest.find_first_of(ends));
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t' || rest.back() == '\r')) rest.remove_suffix(1);
  return std::string(rest);
}

/// The show_config line that mentions `needle` (e.g. "MKL-DNN"), without its list dash, or "".
std::string config_line(std::string_view config, std::string_view needle) {
  const std::size_t at = config.find(needle);
  if (at == std::string_view::npos) return {};
  const std::size_t begin = config.rfind('\n', at) == std::string_view::npos ? 0 : config.rfind('\n', at) + 1;
  std::string line(config.substr(begin, config.find('\n', at) - begin));
  const std::size_t text = line.find_first_not_of(" -");
  return text == std::string::npos ? std::string() : line.substr(text);
}

/// The canonical path of the shared object holding `address`, or "".
std::string object_path(const void* address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return {};
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) != nullptr ? std::string(resolved) : std::string(info.dli_fname);
}

/// A function pointer from a symbol address (memcpy: ISO C++ only conditionally allows the cast).
template <class Fn>
Fn as_function(void* symbol) {
  Fn fn = nullptr;
  if (symbol != nullptr) std::memcpy(&fn, &symbol, sizeof fn);
  return fn;
}

struct BlasFacts {
  std::string library;  ///< the object that defines sgemm_ for libtorch_cpu
  std::string core;     ///< its OpenBLAS core, or why there is none
};

/// The BLAS LibTorch's CPU library calls. dlsym on libtorch_cpu's own handle searches it and its
/// dependencies in load order: the BLAS it was linked against, even when a program (such as a
/// benchmark counting BLAS calls) interposes its own `sgemm_` in front of it.
BlasFacts blas_facts() {
  BlasFacts facts;
  int (*const in_torch_cpu)() = &at::get_num_threads;
  void* address = nullptr;
  std::memcpy(&address, &in_torch_cpu, sizeof address);
  const std::string torch_cpu = object_path(address);
  void* torch = torch_cpu.empty() ? nullptr : dlopen(torch_cpu.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  void* sgemm = torch != nullptr ? dlsym(torch, "sgemm_") : nullptr;
  if (torch != nullptr) dlclose(torch);
  facts.library = object_path(sgemm);
  if (facts.library.empty()) {
    facts.library = "none: LibTorch's CPU library resolves no sgemm_";
    facts.core = "none: no BLAS";
    return facts;
  }
  void* blas = dlopen(facts.library.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  auto corename = as_function<char* (*)()>(blas != nullptr ? dlsym(blas, "openblas_get_corename") : nullptr);
  const char* core = corename != nullptr ? corename() : nullptr;
  facts.core = core != nullptr ? std::string(core) : "none: this BLAS is not OpenBLAS (no openblas_get_corename)";
  if (blas != nullptr) dlclose(blas);
  return facts;
}

}  // namespace

EnvironmentFingerprint libtorch_fingerprint() {
  EnvironmentFingerprint fp;
  const std::string config = at::show_config();
  const auto or_unknown = [](std::string value) { return value.empty() ? std::string("unknown") : value; };
  fp.set("provider.libtorch.loaded_version", or_unknown(config_value(config, "TORCH_VERSION=", ",\n")));
  fp.set("provider.libtorch.blas", or_unknown(config_value(config, "BLAS_INFO=", ",\n")));
  const BlasFacts blas = blas_facts();
  fp.set("provider.libtorch.blas.library", blas.library);
  fp.set("provider.libtorch.blas.core", blas.core);
  fp.set("provider.libtorch.cpu_capability", or_unknown(config_value(config, "CPU capability usage:", "\n")));
  fp.set("provider.libtorch.onednn", or_unknown(config_line(config, "MKL-DNN")));
  fp.set("provider.libtorch.threads", std::to_string(at::get_num_threads()));
  return fp;
}

}  // namespace capsule
