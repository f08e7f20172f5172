//===- dtrt/cuda/peaks.h - What this GPU does, measured ---------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// dtrt/peaks.h's measurement on a GPU (runtime/lib/cuda/peaks.cpp): a cuBLAS
// product in the program's precision and a copy within the device, cached
// per GPU model. MFU keeps the datasheet's dense peak as its denominator (as
// llm.c and PaLM count it, ../shared/notes/gpu-figures.md); the measured
// figures stand beside it, and stand in for it on a GPU the table lacks.
//
// Built only where the CUDA toolkit was found (DT_HAVE_CUDA).
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CUDA_PEAKS_H
#define DTRT_CUDA_PEAKS_H

#include "dtrt/cuda/blas.h"
#include "dtrt/device.h"

#include <string>

namespace dtrt::cuda {

/// The peaks cache's key of `gpu`'s figures for products of `type`.
std::string gpuPeaksKey(const std::string &gpu, const std::string &type);

/// `gpu`'s peaks for a program computing in `precision`: cached, or
/// measured now on `stream` through `blas` (and cached when `writeCache`).
Expected<DevicePeaks> gpuPeaks(Blas &blas, cudaStream_t stream,
                               const std::string &gpu,
                               const std::string &precision, bool writeCache);

} // namespace dtrt::cuda

#endif // DTRT_CUDA_PEAKS_H
