//===- dtrt/cuda/library.h - Generated GPU kernels, loaded ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The kernels dtc generates for a program's fused regions
// (convert-dt-fused-to-gpu, `dtc --emit=ptx`) as the runtime loads them: one
// PTX (or cubin) image through the CUDA runtime's library API, so that nothing
// links the driver (libcuda) and a program still starts where there is none.
// Every generated kernel takes one argument, the arena's base, and walks its
// elements in a grid-stride loop, so any grid covers it: `launch` picks one
// from the element count and the device's multiprocessors.
//
// Built only where the CUDA toolkit was found (DT_HAVE_CUDA).
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CUDA_LIBRARY_H
#define DTRT_CUDA_LIBRARY_H

#include "dtrt/error.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace dtrt::cuda {

/// "what: the CUDA runtime's name and words for `e`".
Error cudaFailure(const std::string &what, cudaError_t e);

/// One loaded image of generated kernels, unloaded on destruction.
class KernelLibrary {
public:
  /// Loads `image`: NUL-terminated PTX text (the driver compiles it for the
  /// current device) or a cubin. A PTX the driver rejects fails with its
  /// JIT log.
  static Expected<KernelLibrary> load(const std::string &image);

  KernelLibrary(KernelLibrary &&other) noexcept;
  KernelLibrary &operator=(KernelLibrary &&other) noexcept;
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;
  ~KernelLibrary();

  /// The kernel called `name` (`<entry>_fused_<n>`).
  Expected<cudaKernel_t> kernel(const std::string &name) const;

  /// Launches generated kernel `k` over `elements` output elements (or the
  /// plan's `n`: vector groups of them) of the arena at `arena` (device
  /// memory) on `stream`, asynchronously.
  Status launch(cudaKernel_t k, char *arena, int64_t elements,
                cudaStream_t stream) const;
  /// Launches `k` with exactly `blocks` blocks: a kernel that runs several
  /// generated kernels side by side (the plan's "grid"), each member in its
  /// own blocks.
  Status launchBlocks(cudaKernel_t k, char *arena, int64_t blocks,
                      cudaStream_t stream) const;

private:
  KernelLibrary() = default;
  cudaLibrary_t library_ = nullptr;
  int multiprocessors_ = 1;
};

} // namespace dtrt::cuda

#endif // DTRT_CUDA_LIBRARY_H
