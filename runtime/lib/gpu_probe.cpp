//===- gpu_probe.cpp - is there a GPU here? -------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// What `--backend cuda` needs to say why it cannot train on a GPU. Built with
// the CUDA runtime (linked statically: it loads the driver, libcuda, only when
// first called, so a program starts on machines without one) where the
// toolkit was found, and as a stub that finds nothing elsewhere.
//
//===----------------------------------------------------------------------===//

#include "dtrt/device.h"

#ifdef DTRT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace dtrt {

GpuProbe probeGpus() {
  GpuProbe probe;
#ifdef DTRT_HAVE_CUDA
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    probe.why = e == cudaErrorInsufficientDriver
                    ? "no usable NVIDIA driver: the CUDA runtime says \""
                    : "the CUDA runtime says \"";
    probe.why += std::string(cudaGetErrorString(e)) + "\"";
    return probe;
  }
  probe.count = count;
  cudaDeviceProp props;
  if (count > 0 && cudaGetDeviceProperties(&props, 0) == cudaSuccess)
    probe.name = props.name;
  if (count == 0)
    probe.why = "the CUDA runtime sees no device";
#else
  probe.why = "this libdtrt was built without the CUDA toolkit";
#endif
  return probe;
}

} // namespace dtrt
