//===- dtrt/peaks_cache.h - The measured peaks, cached per machine -*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// What a program measures of its machine (dtrt/peaks.h) outlives the run in
// `$DT_CACHE_DIR/peaks.json` (default `$XDG_CACHE_HOME/dt`, else
// `$HOME/.cache/dt`), one JSON object of entries:
//
//   "CPU | OpenBLAS CORE | T threads x R ranks":
//       {"cpu", "threads", "ranks", "gemm_f32_flops", "copy_bytes_per_s",
//        "gemm_size"}
//   "CPU | all-reduce over R ranks on one machine":
//       {"cpu", "ranks", "link_bytes_per_s"}
//   "CPU | OpenBLAS CORE | T threads x R ranks | KERNEL A x B x ...":
//       {"cpu", "threads", "ranks", "kernel", "args", "seconds"}
//       one of a program's own kernel calls (the manifest's spans[].kernel),
//       timed: seconds a call
//   "GPU | cuBLASLt V | product B x M x N x K flags ... pitches ...":
//       {"gpu", "algo"}
//       the cuBLASLt algorithm timed fastest for one product of a GPU plan
//       (dtrt/cuda/blas.h), which a later run on the same GPU model and
//       cuBLASLt takes back
//
// The programs write it; `dtc --report` reads it to predict a step on this
// machine before anything runs. This file is the part both need (dtc links it
// alone, as `dtpeakscache`): where the cache is, this CPU's name, and the
// look-ups. A cache that is missing or unreadable reads as empty.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_PEAKS_CACHE_H
#define DTRT_PEAKS_CACHE_H

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dtrt {

/// The cache's directory ("" when the environment names none).
std::string peaksCacheDir();

/// The CPUs this process may run on (its affinity mask, which honours
/// taskset, cgroups and Slurm's binding): what a run's default threads are
/// divided from, and what dtc --report assumes a run here gets.
int availableCpus();

/// /proc/cpuinfo's model name ("unknown CPU" without one).
std::string cpuModel();

/// The keys of an entry of sgemm and copy figures, and of a link's.
std::string peaksKey(const std::string &cpu, const std::string &blasCore,
                     int threads, int ranks);
std::string linkKey(const std::string &cpu, int ranks);

/// One call of a CPU kernel whose speed depends on its sizes more than a
/// roofline says: "matmul" (dtk_matmul_f32's batch, M, N, K, trans_a,
/// trans_b), "attention" and "attention_grad" (slices, T, D, causal), and
/// the convolutions "conv2d", "conv2d_input_grad" and "conv2d_weight_grad"
/// (N, C, H, W, O, KH, KW, OH, OW, strides, paddings, dilations, groups).
struct KernelCall {
  std::string kernel;
  std::vector<int64_t> args;
  bool operator<(const KernelCall &o) const {
    return kernel != o.kernel ? kernel < o.kernel : args < o.args;
  }
  bool operator==(const KernelCall &o) const {
    return kernel == o.kernel && args == o.args;
  }
};
std::string kernelKey(const std::string &cpu, const std::string &blasCore,
                      int threads, int ranks, const KernelCall &call);

/// The cache at `path`: its object, or an empty one.
nlohmann::json readPeaksCache(const std::string &path);

/// Figures measured with `threads` threads on each of `ranks` ranks sharing
/// the machine.
struct CachedPeaks {
  double gemmFlops = 0, copyBytesPerS = 0;
  int gemmSize = 0;
};

/// The entry of `cpu` for `threads` x `ranks` (the best of the OpenBLAS
/// kernels measured), if any.
std::optional<CachedPeaks> findCachedPeaks(const nlohmann::json &cache,
                                           const std::string &cpu,
                                           int threads, int ranks);

/// The all-reduce bus bandwidth measured over `ranks` ranks on one machine
/// of `cpu`, if any.
std::optional<double> findCachedLink(const nlohmann::json &cache,
                                     const std::string &cpu, int ranks);

/// Seconds a call of every kernel call timed on `cpu` with `threads` x
/// `ranks` (the fastest of the OpenBLAS kernels measured).
std::map<KernelCall, double> findCachedKernels(const nlohmann::json &cache,
                                               const std::string &cpu,
                                               int threads, int ranks);

} // namespace dtrt

#endif // DTRT_PEAKS_CACHE_H
