//===- peaks.cpp - What this machine can do, measured ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/peaks.h"

#include "dtrt/comm.h"
#include "dtrt/file.h"
#include "dtrt/peaks_cache.h"

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

bool cpuHasFlag(const std::string &flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0)
      return (line + " ").find(" " + flag + " ") != std::string::npos;
  return false;
}

/// Adds `entries` to the cache in `dir` (creating it), re-read now so that
/// what other ranks wrote meanwhile stays: written beside and renamed, so
/// that ranks writing at once leave one whole file. Failing to is no error
/// (the next run measures again); returns the path written, or "".
std::string addToCache(const std::string &dir, const nlohmann::json &entries) {
  std::string path = dir + "/peaks.json";
  nlohmann::json cache = readPeaksCache(path);
  for (const auto &[key, entry] : entries.items())
    cache[key] = entry;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string tmp = fmt::format("{}.{}.tmp", path, getpid());
  if (writeFileSynced(tmp, cache.dump(2) + "\n") && renameSynced(tmp, path))
    return path;
  std::filesystem::remove(tmp, ec);
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
  int ranks = std::max(1, ranksHere);
  std::string cpu = cpuModel(), core = openblas_get_corename();
  std::string dir = peaksCacheDir();
  if (!dir.empty()) {
    p.cachePath = dir + "/peaks.json";
    nlohmann::json cache = readPeaksCache(p.cachePath);
    auto it = cache.find(peaksKey(cpu, core, p.threads, ranks));
    if (it != cache.end() && it->is_object()) {
      // Exactly this entry (these OpenBLAS kernels), read as dtc reads it.
      nlohmann::json one = {{"entry", *it}};
      if (std::optional<CachedPeaks> c =
              findCachedPeaks(one, cpu, p.threads, ranks)) {
        p.gemmFlops = c->gemmFlops;
        p.copyBytesPerS = c->copyBytesPerS;
        p.gemmSize = c->gemmSize;
        p.cached = true;
        return p;
      }
    }
  }
  measure(p);
  if (dir.empty())
    return p;
  p.cachePath = addToCache(dir, {{peaksKey(cpu, core, p.threads, ranks),
                                  {{"cpu", cpu},
                                   {"threads", p.threads},
                                   {"ranks", ranks},
                                   {"gemm_f32_flops", p.gemmFlops},
                                   {"copy_bytes_per_s", p.copyBytesPerS},
                                   {"gemm_size", p.gemmSize}}}});
  return p;
}

void cacheLinkBandwidth(int ranks, double bytesPerS) {
  std::string dir = peaksCacheDir();
  if (dir.empty())
    return;
  std::string cpu = cpuModel();
  addToCache(
      dir,
      {{linkKey(cpu, ranks),
        {{"cpu", cpu}, {"ranks", ranks}, {"link_bytes_per_s", bytesPerS}}}});
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
