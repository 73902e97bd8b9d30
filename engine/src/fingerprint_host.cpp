// SPDX-License-Identifier: Apache-2.0
// Host collection for the environment fingerprint: the operating system, the CPU, the thread
// settings and the BLAS configuration of this process. It includes no provider header and links
// no provider library: an OpenBLAS is looked up in the running process with dlsym, so the
// fingerprint reports the BLAS that actually computes, not one that happens to be installed.
#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "capsule/fingerprint.hpp"
#include "capsule/text.hpp"

namespace capsule {
namespace {

/// The thread and BLAS settings a result can depend on; each is reported as set, or "unset".
constexpr std::string_view kReportedVariables[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                   "OPENBLAS_CORETYPE"};

std::string trim(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const std::size_t last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last - first + 1));
}

/// The CPU's model name from /proc/cpuinfo: x86 says `model name`; Arm and others say
/// `Hardware`, `Processor`, `cpu model` or `cpu` (POWER). The first present field in that
/// order of preference wins.
std::string cpu_model() {
  static constexpr std::string_view kFields[] = {"model name", "Hardware", "Processor", "cpu model", "cpu"};
  std::ifstream in("/proc/cpuinfo");
  if (!in) return "unknown (no /proc/cpuinfo)";
  std::string found[std::size(kFields)];
  std::string line;
  // Enough lines for the first processor's block and the trailing Hardware line on Arm, without
  // reading a many-core machine's whole file.
  for (int read = 0; read < 4096 && std::getline(in, line); ++read) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string field = trim(std::string_view(line).substr(0, colon));
    for (std::size_t i = 0; i < std::size(kFields); ++i) {
      if (field == kFields[i] && found[i].empty()) found[i] = trim(std::string_view(line).substr(colon + 1));
    }
  }
  for (const std::string& value : found) {
    if (!value.empty()) return value;
  }
  return "unknown (no model name in /proc/cpuinfo)";
}

/// A function of the loaded OpenBLAS, or nullptr. The symbol address becomes a function pointer
/// through memcpy, which ISO C++ allows where a cast between object and function pointers is
/// only conditionally supported.
template <class Fn>
Fn openblas_function(const char* name) {
  void* symbol = dlsym(RTLD_DEFAULT, name);
  Fn fn = nullptr;
  if (symbol != nullptr) std::memcpy(&fn, &symbol, sizeof fn);
  return fn;
}

void add_openblas(EnvironmentFingerprint& fingerprint) {
  using TextFn = char* (*)();
  using CountFn = int (*)();
  const auto config = openblas_function<TextFn>("openblas_get_config");
  if (config == nullptr) {
    fingerprint.set(std::string(fingerprint_key::kOpenblas), "no OpenBLAS loaded in this process");
    return;
  }
  const char* text = config();
  fingerprint.set(std::string(fingerprint_key::kOpenblas), text != nullptr ? text : "");
  if (const auto corename = openblas_function<TextFn>("openblas_get_corename")) {
    const char* core = corename();
    fingerprint.set(std::string(fingerprint_key::kOpenblasCore), core != nullptr ? core : "");
  }
  if (const auto threads = openblas_function<CountFn>("openblas_get_num_threads")) {
    fingerprint.set(std::string(fingerprint_key::kOpenblasThreads), std::to_string(threads()));
  }
}

}  // namespace

EnvironmentFingerprint collect_host_fingerprint(const EnvironmentLookup& lookup) {
  EnvironmentFingerprint fingerprint;
  utsname host{};
  if (uname(&host) == 0) {
    fingerprint.set(std::string(fingerprint_key::kHostOs), str(host.sysname, " ", host.release));
    fingerprint.set(std::string(fingerprint_key::kHostArch), host.machine);
  } else {
    fingerprint.set(std::string(fingerprint_key::kHostOs), "unknown (uname failed)");
    fingerprint.set(std::string(fingerprint_key::kHostArch), "unknown (uname failed)");
  }
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  fingerprint.set(std::string(fingerprint_key::kHostCpus), cpus > 0 ? std::to_string(cpus) : "unknown");
  fingerprint.set(std::string(fingerprint_key::kCpuModel), cpu_model());
  fingerprint.set(std::string(fingerprint_key::kHardwareThreads), std::to_string(std::thread::hardware_concurrency()));
  for (const std::string_view name : kReportedVariables) {
    const std::optional<std::string> value = lookup ? lookup(name) : std::nullopt;
    fingerprint.set(fingerprint_key::environment_variable(name), value ? *value : "unset");
  }
  add_openblas(fingerprint);
  return fingerprint;
}

}  // namespace capsule
