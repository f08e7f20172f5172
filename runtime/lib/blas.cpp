//===- blas.cpp - Choosing OpenBLAS's kernels -----------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/blas.h"

#include <cblas.h>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <strings.h>
#include <unistd.h>

namespace dtrt {

namespace {

/// Set by the re-executed program: what OpenBLAS had detected by itself.
constexpr const char *kDetectedVar = "DT_OPENBLAS_DETECTED";
/// How long OpenBLAS's idle threads spin before sleeping: 2^N cycles.
constexpr const char *kTimeoutVar = "OPENBLAS_THREAD_TIMEOUT";

/// How good a kernel family is for sgemm: generic SSE < AVX2 < AVX-512.
int rank(const char *core) {
  static const char *const kAvx512[] = {"skylakex", "cooperlake",
                                        "sapphirerapids"};
  static const char *const kAvx2[] = {"haswell", "zen", "skylake"};
  for (const char *c : kAvx512)
    if (strcasecmp(core, c) == 0)
      return 2;
  for (const char *c : kAvx2)
    if (strcasecmp(core, c) == 0)
      return 1;
  return 0;
}

} // namespace

std::string bestBlasCore() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd"))
    return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
#endif
  return "";
}

void reexecWithBetterBlas(char **argv) {
  bool core = false, timeout = false;
  // Kernels: OpenBLAS's own detection misses AVX-512 on some CPUs.
  if (!std::getenv("OPENBLAS_CORETYPE") && !std::getenv(kDetectedVar)) {
    std::string best = bestBlasCore();
    const char *detected = openblas_get_corename();
    if (!best.empty() && detected && rank(detected) < rank(best.c_str())) {
      setenv("OPENBLAS_CORETYPE", best.c_str(), 1);
      setenv(kDetectedVar, detected, 1);
      core = true;
    }
  }
  // Idle threads: OpenBLAS's spin in sched_yield for 2^28 cycles after each
  // product, on the cores the kernels' pool (dtk_parallel_for) needs between
  // products; 2^4 lets them sleep at once. gpt_tiny on two threads: 11.2-11.7k
  // tokens/s before, 13.7-14.3k after (bench/results/gpt_tiny-*.md).
  if (!std::getenv(kTimeoutVar)) {
    setenv(kTimeoutVar, "4", 1);
    timeout = true;
  }
  if (!core && !timeout)
    return;
  execv("/proc/self/exe", argv);
  // No /proc, or not allowed: keep OpenBLAS's choices.
  if (core) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(kDetectedVar);
  }
  if (timeout)
    unsetenv(kTimeoutVar);
}

std::string describeBlas() {
  std::string config = openblas_get_config();
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY ..." -> "OpenBLAS 0.3.21"
  size_t second = config.find(' ', config.find(' ') + 1);
  std::string version = config.substr(0, second);
  std::string text = fmt::format("{}, {} kernels", version,
                                 openblas_get_corename());
  if (const char *detected = std::getenv(kDetectedVar))
    text += fmt::format(" (OpenBLAS detected {} on this CPU; set "
                        "OPENBLAS_CORETYPE to choose)",
                        detected);
  else if (std::getenv("OPENBLAS_CORETYPE"))
    text += " (OPENBLAS_CORETYPE)";
  return text;
}

} // namespace dtrt
