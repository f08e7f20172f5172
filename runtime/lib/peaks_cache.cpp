//===- peaks_cache.cpp - The measured peaks, cached per machine -----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// See dtrt/peaks_cache.h.
//
//===----------------------------------------------------------------------===//

#include "dtrt/peaks_cache.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <sched.h>
#include <unistd.h>

namespace dtrt {

std::string peaksCacheDir() {
  if (const char *d = std::getenv("DT_CACHE_DIR"); d && *d)
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/dt";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/dt";
  return "";
}

int availableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0)
      if (size_t colon = line.find(':'); colon != std::string::npos)
        return line.substr(line.find_first_not_of(" \t", colon + 1));
  return "unknown CPU";
}

std::string peaksKey(const std::string &cpu, const std::string &blasCore,
                     int threads, int ranks) {
  return fmt::format("{} | OpenBLAS {} | {} threads x {} ranks", cpu, blasCore,
                     threads, ranks);
}

std::string linkKey(const std::string &cpu, int ranks) {
  return fmt::format("{} | all-reduce over {} ranks on one machine", cpu,
                     ranks);
}

std::string kernelKey(const std::string &cpu, const std::string &blasCore,
                      int threads, int ranks, const KernelCall &call) {
  return fmt::format("{} | {} {}", peaksKey(cpu, blasCore, threads, ranks),
                     call.kernel, fmt::join(call.args, " x "));
}

nlohmann::json readPeaksCache(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return nlohmann::json::object();
  // A damaged file is discarded, not thrown.
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

namespace {

// Look-ups that never throw: a cache edited by hand, or by another version,
// is read as far as it makes sense (dtc reads it without exceptions).
double number(const nlohmann::json &e, const char *key) {
  auto it = e.find(key);
  return it != e.end() && it->is_number() ? it->get<double>() : 0.0;
}

bool isEntryOf(const nlohmann::json &e, const std::string &cpu, int ranks) {
  if (!e.is_object())
    return false;
  auto it = e.find("cpu");
  return it != e.end() && it->is_string() &&
         it->get_ref<const std::string &>() == cpu &&
         number(e, "ranks") == double(ranks);
}

} // namespace

std::optional<CachedPeaks> findCachedPeaks(const nlohmann::json &cache,
                                           const std::string &cpu,
                                           int threads, int ranks) {
  std::optional<CachedPeaks> best;
  for (const auto &[key, e] : cache.items()) {
    if (!isEntryOf(e, cpu, ranks) || number(e, "threads") != double(threads))
      continue;
    CachedPeaks p;
    p.gemmFlops = number(e, "gemm_f32_flops");
    p.copyBytesPerS = number(e, "copy_bytes_per_s");
    p.gemmSize = int(number(e, "gemm_size"));
    if (p.gemmFlops > 0 && p.copyBytesPerS > 0 &&
        (!best || p.gemmFlops > best->gemmFlops))
      best = p;
  }
  return best;
}

std::optional<double> findCachedLink(const nlohmann::json &cache,
                                     const std::string &cpu, int ranks) {
  auto it = cache.find(linkKey(cpu, ranks));
  if (it == cache.end() || !isEntryOf(*it, cpu, ranks))
    return std::nullopt;
  double link = number(*it, "link_bytes_per_s");
  return link > 0 ? std::optional<double>(link) : std::nullopt;
}

std::map<KernelCall, double> findCachedKernels(const nlohmann::json &cache,
                                               const std::string &cpu,
                                               int threads, int ranks) {
  std::map<KernelCall, double> times;
  for (const auto &[key, e] : cache.items()) {
    if (!isEntryOf(e, cpu, ranks) || number(e, "threads") != double(threads))
      continue;
    auto kernel = e.find("kernel"), args = e.find("args");
    double seconds = number(e, "seconds");
    if (kernel == e.end() || !kernel->is_string() || args == e.end() ||
        !args->is_array() || !(seconds > 0))
      continue;
    KernelCall call{kernel->get<std::string>(), {}};
    bool ok = true;
    for (const nlohmann::json &a : *args) {
      ok = ok && a.is_number_integer();
      call.args.push_back(ok ? a.get<int64_t>() : 0);
    }
    if (!ok)
      continue;
    auto [at, fresh] = times.try_emplace(call, seconds);
    if (!fresh)
      at->second = std::min(at->second, seconds);
  }
  return times;
}

} // namespace dtrt
