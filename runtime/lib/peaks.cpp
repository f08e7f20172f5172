//===- peaks.cpp - What this machine can do, measured ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/peaks.h"

#include "dtrt/comm.h"
#include "dtrt/file.h"

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <vector>

namespace dtrt {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
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

bool cpuHasFlag(const std::string &flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0)
      return (line + " ").find(" " + flag + " ") != std::string::npos;
  return false;
}

std::string cacheDir() {
  if (const char *d = std::getenv("DT_CACHE_DIR"); d && *d)
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/dt";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/dt";
  return "";
}

/// The best time of `reps` calls of `f` after one to warm up.
template <typename F> double bestOf(int reps, F f) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t = Clock::now();
    f();
    best = std::min(best, seconds(t));
  }
  return best;
}

void measure(HostPeaks &p) {
  // Large enough that OpenBLAS runs at its speed on a few threads, small
  // enough to take tens of milliseconds.
  int n = p.threads <= 4 ? 1024 : 2048;
  p.gemmSize = n;
  std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 0.5f),
      c(size_t(n) * n, 0.0f);
  double t = bestOf(3, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
  });
  p.gemmFlops = 2.0 * double(n) * n * n / t;
  // Larger than any cache: memory bandwidth.
  size_t bytes = size_t(64) << 20;
  std::vector<char> from(bytes, 1), to(bytes, 0);
  double copy = bestOf(3, [&] {
    std::memcpy(to.data(), from.data(), bytes);
    // The copy's result is never read: keep the compiler from dropping it.
    asm volatile("" : : "r"(to.data()) : "memory");
  });
  p.copyBytesPerS = 2.0 * double(bytes) / copy;
}

/// Cores x max clock x f32 FLOPs per cycle (two FMA units of 8 or 16 lanes),
/// when /sys gives the clock.
void nominal(HostPeaks &p) {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  double khz = 0;
  if (!(in >> khz) || khz <= 0)
    return;
  bool avx512 = cpuHasFlag("avx512f"), fma = cpuHasFlag("fma");
  int perCycle = avx512 ? 64 : fma ? 32 : 16;
  p.nominalFlops = double(p.threads) * khz * 1e3 * perCycle;
  p.nominalHow =
      fmt::format("{} core{} x {:.2f} GHz x {} FLOP/cycle", p.threads,
                  p.threads == 1 ? "" : "s", khz / 1e6, perCycle);
}

} // namespace

HostPeaks hostPeaks(int threads, int ranksHere) {
  HostPeaks p;
  p.threads = std::max(1, threads);
  nominal(p);
  std::string key =
      fmt::format("{} | OpenBLAS {} | {} threads x {} ranks", cpuModel(),
                  openblas_get_corename(), p.threads, std::max(1, ranksHere));
  std::string dir = cacheDir();
  nlohmann::json cache = nlohmann::json::object();
  if (!dir.empty()) {
    p.cachePath = dir + "/peaks.json";
    if (Expected<std::string> text = readFile(p.cachePath); text) {
      nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
      if (j.is_object())
        cache = std::move(j);
    }
    auto it = cache.find(key);
    if (it != cache.end() && it->is_object() &&
        it->value("gemm_f32_flops", 0.0) > 0 &&
        it->value("copy_bytes_per_s", 0.0) > 0) {
      p.gemmFlops = (*it)["gemm_f32_flops"];
      p.copyBytesPerS = (*it)["copy_bytes_per_s"];
      p.gemmSize = it->value("gemm_size", 0);
      p.cached = true;
      return p;
    }
  }
  measure(p);
  if (dir.empty())
    return p;
  cache[key] = {{"gemm_f32_flops", p.gemmFlops},
                {"copy_bytes_per_s", p.copyBytesPerS},
                {"gemm_size", p.gemmSize}};
  // Written beside and renamed, so that ranks measuring at once leave one
  // whole file; failing to is no error (the next run measures again).
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string tmp = fmt::format("{}.{}.tmp", p.cachePath, getpid());
  if (writeFileSynced(tmp, cache.dump(2) + "\n") &&
      renameSynced(tmp, p.cachePath))
    return p;
  std::filesystem::remove(tmp, ec);
  p.cachePath.clear();
  return p;
}

std::optional<double> allReduceBandwidth(Communicator &comm) {
  int n = comm.worldSize();
  if (n < 2)
    return std::nullopt;
  constexpr int64_t kCount = int64_t(1) << 21; // 8 MiB of f32
  std::vector<float> src(kCount, 1.0f), dst(kCount, 0.0f);
  double best = 1e30;
  for (int i = 0; i < 4; ++i) {
    if (!comm.barrier("the link bandwidth probe"))
      return std::nullopt;
    auto t = Clock::now();
    if (!comm.allReduceSum(src.data(), dst.data(), kCount, DType::F32,
                           comm.mesh().allAxes(), "the link bandwidth probe"))
      return std::nullopt;
    if (i > 0) // the first warms the engine's buffers
      best = std::min(best, seconds(t));
  }
  double moved = 2.0 * double(n - 1) / double(n) * double(kCount) * 4;
  return moved / best;
}

} // namespace dtrt
