//===- peaks.cpp - What this machine can do, measured ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/peaks.h"

#include "dtrt/comm.h"
#include "dtrt/file.h"
#include "dtrt/peaks_cache.h"

#include "dtk/kernels.h"

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

} // namespace

std::string addToPeaksCache(const nlohmann::json &entries) {
  std::string dir = peaksCacheDir();
  return dir.empty() ? "" : addToCache(dir, entries);
}

namespace {

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

/// The seconds of one call of `f`: the mean over calls filling about 6 ms
/// after a warm-up. Not the best of a few: ranks that share cores take turns
/// on them, and a short window one rank had to itself would price the
/// contended step as if it had the machine.
template <typename F> double timeCall(F f) {
  auto t = Clock::now();
  f();
  int reps = int(std::clamp(6e-3 / std::max(seconds(t), 1e-7), 1.0, 3000.0));
  t = Clock::now();
  for (int i = 0; i < reps; ++i)
    f();
  return seconds(t) / reps;
}

/// Times one kernel call on buffers of its sizes; null for a kernel this
/// does not know, a malformed call, or one of more than 64 MiB of operands
/// (those run near the peak, and would take long to time).
std::optional<double> timeKernel(const KernelCall &c) {
  auto fits = [](double floats) {
    return floats > 0 && 4 * floats <= double(int64_t(64) << 20);
  };
  const std::vector<int64_t> &a = c.args;
  if (c.kernel == "matmul" && a.size() == 6) {
    int64_t batch = a[0], m = a[1], n = a[2], k = a[3];
    double floats = double(batch) * double(m * k + k * n + m * n);
    if (!fits(floats) || batch <= 0 || m <= 0 || n <= 0 || k <= 0)
      return std::nullopt;
    std::vector<float> x(size_t(batch * m * k), 0.5f),
        y(size_t(batch * k * n), 0.25f), z(size_t(batch * m * n), 0.0f);
    return timeCall([&] {
      dtk_matmul_f32(x.data(), y.data(), z.data(), batch, m, n, k,
                     int32_t(a[4]), int32_t(a[5]));
    });
  }
  if ((c.kernel == "attention" || c.kernel == "attention_grad") &&
      a.size() == 4) {
    int64_t slices = a[0], t = a[1], d = a[2];
    size_t one = size_t(slices * t * d);
    bool grad = c.kernel == "attention_grad";
    if (!fits(double(one) * (grad ? 7 : 4)) || slices <= 0 || t <= 0 || d <= 0)
      return std::nullopt;
    std::vector<float> q(one, 0.01f), k(one, 0.02f), v(one, 0.5f), o(one, 0.0f),
        lse(size_t(slices * t)), dout(grad ? one : 0, 0.1f), dq(grad ? one : 0),
        dk(grad ? one : 0), dv(grad ? one : 0);
    auto forward = [&] {
      dtk_attention_f32(q.data(), k.data(), v.data(), o.data(), lse.data(),
                        slices, t, d, int32_t(a[3]));
    };
    if (!grad)
      return timeCall(forward);
    forward(); // the O and log-sum-exp the gradient reads
    return timeCall([&] {
      dtk_attention_grad_f32(q.data(), k.data(), v.data(), o.data(), lse.data(),
                             dout.data(), dq.data(), dk.data(), dv.data(),
                             slices, t, d, int32_t(a[3]));
    });
  }
  if ((c.kernel == "conv2d" || c.kernel == "conv2d_input_grad" ||
       c.kernel == "conv2d_weight_grad") &&
      a.size() == 16) {
    // N, C, H, W, O, KH, KW, OH, OW, strides, paddings, dilations, groups.
    int64_t n = a[0], ch = a[1], h = a[2], w = a[3], o = a[4], kh = a[5],
            kw = a[6], oh = a[7], ow = a[8], groups = a[15];
    if (n <= 0 || ch <= 0 || h <= 0 || w <= 0 || o <= 0 || kh <= 0 || kw <= 0 ||
        oh <= 0 || ow <= 0 || groups <= 0 || ch % groups || o % groups)
      return std::nullopt;
    size_t xs = size_t(n * ch * h * w),
           ws = size_t(o * (ch / groups) * kh * kw),
           ys = size_t(n * o * oh * ow);
    if (!fits(double(xs) + double(ws) + double(ys)))
      return std::nullopt;
    std::vector<float> x(xs, 0.5f), wt(ws, 0.25f), y(ys, 0.125f);
    if (c.kernel == "conv2d")
      return timeCall([&] {
        dtk_conv2d_f32(x.data(), wt.data(), y.data(), n, ch, h, w, o, kh, kw,
                       oh, ow, a[9], a[10], a[11], a[12], a[13], a[14], groups);
      });
    if (c.kernel == "conv2d_input_grad")
      return timeCall([&] {
        dtk_conv2d_input_grad_f32(y.data(), wt.data(), x.data(), n, ch, h, w, o,
                                  kh, kw, oh, ow, a[9], a[10], a[11], a[12],
                                  a[13], a[14], groups);
      });
    return timeCall([&] {
      dtk_conv2d_weight_grad_f32(x.data(), y.data(), wt.data(), n, ch, h, w, o,
                                 kh, kw, oh, ow, a[9], a[10], a[11], a[12],
                                 a[13], a[14], groups);
    });
  }
  return std::nullopt;
}

} // namespace

HostPeaks hostPeaks(int threads, int ranksHere) {
  HostPeaks p;
  p.threads = std::max(1, threads);
  nominal(p);
  int ranks = std::max(1, ranksHere);
  std::string cpu = cpuModel(), core = openblas_get_corename();
  std::string dir = peaksCacheDir();
  std::string key = peaksKey(cpu, core, p.threads, ranks);
  if (!dir.empty()) {
    p.cachePath = dir + "/peaks.json";
    nlohmann::json cache = readPeaksCache(p.cachePath);
    auto it = cache.find(key);
    if (it != cache.end() && it->is_object()) {
      // Exactly this entry (these OpenBLAS kernels), read as dtc reads it.
      nlohmann::json one = {{"entry", *it}};
      if (std::optional<CachedPeaks> c =
              findCachedPeaks(one, cpu, p.threads, ranks)) {
        p.gemmFlops = c->gemmFlops;
        p.copyBytesPerS = c->copyBytesPerS;
        p.gemmSize = c->gemmSize;
        p.cached = true;
      }
    }
  }
  nlohmann::json entries = nlohmann::json::object();
  if (!p.cached) {
    measure(p);
    entries[key] = {{"cpu", cpu},
                    {"threads", p.threads},
                    {"ranks", ranks},
                    {"gemm_f32_flops", p.gemmFlops},
                    {"copy_bytes_per_s", p.copyBytesPerS},
                    {"gemm_size", p.gemmSize}};
  }
  if (dir.empty() || entries.empty())
    return p;
  std::string written = addToCache(dir, entries);
  if (!p.cached)
    p.cachePath = written;
  return p;
}

std::map<KernelCall, double> kernelTimes(const std::vector<KernelCall> &calls,
                                         int threads, int ranksHere,
                                         Communicator *comm, bool writes) {
  threads = std::max(1, threads);
  int ranks = std::max(1, ranksHere);
  std::string cpu = cpuModel(), core = openblas_get_corename();
  std::string dir = peaksCacheDir();
  std::map<KernelCall, double> times =
      dir.empty() ? std::map<KernelCall, double>()
                  : findCachedKernels(readPeaksCache(dir + "/peaks.json"), cpu,
                                      threads, ranks);
  // Which calls to time: those any rank lacks (ranks may read the cache
  // before or after another wrote it), so that all time the same calls.
  std::vector<int64_t> missing(calls.size());
  for (size_t i = 0; i < calls.size(); ++i)
    missing[i] = times.count(calls[i]) ? 0 : 1;
  if (comm && !calls.empty()) {
    std::vector<int64_t> all(missing.size() * size_t(comm->worldSize()));
    // A collective that fails here fails again in the first step, which
    // says so; the prediction just goes without the kernels' times.
    if (!comm->allGather(missing.data(), all.data(), int64_t(missing.size()),
                         DType::I64, comm->mesh().allAxes(),
                         "the kernel timings"))
      return {};
    for (size_t r = 0; r < size_t(comm->worldSize()); ++r)
      for (size_t i = 0; i < missing.size(); ++i)
        missing[i] |= all[r * missing.size() + i];
  }
  nlohmann::json entries = nlohmann::json::object();
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!missing[i])
      continue;
    if (comm && !comm->barrier("the kernel timings"))
      return {};
    std::optional<double> t = timeKernel(calls[i]);
    if (!t) {
      times.erase(calls[i]);
      continue;
    }
    times[calls[i]] = *t;
    entries[kernelKey(cpu, core, threads, ranks, calls[i])] = {
        {"cpu", cpu},
        {"threads", threads},
        {"ranks", ranks},
        {"kernel", calls[i].kernel},
        {"args", calls[i].args},
        {"seconds", *t}};
  }
  if (writes && !dir.empty() && !entries.empty())
    addToCache(dir, entries);
  return times;
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
