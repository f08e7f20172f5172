//===- dtrt/cuda/device.h - The CUDA device ---------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// openDevice's GPU half (runtime/lib/cuda/device.cpp); built only where the
// CUDA toolkit was found (DT_HAVE_CUDA).
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CUDA_DEVICE_H
#define DTRT_CUDA_DEVICE_H

#include "dtrt/abi.h"
#include "dtrt/device.h"

namespace dtrt::cuda {

/// The GPU of this local rank, running `program`'s GPU plan (which must have
/// one: `program.cudaPlan` is not {"unsupported": ...}).
/// A sharded program's collectives run on `collectives`' engine.
Expected<std::unique_ptr<Device>>
openCudaDevice(const Launch &launch, const Program &program,
               const CollectiveSetup &collectives);

} // namespace dtrt::cuda

#endif // DTRT_CUDA_DEVICE_H
