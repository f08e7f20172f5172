//===- dtrt/cuda/cudnn.h - cuDNN's fused attention, opened for a GPU -*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A bf16 (or f16) attention and its gradient can run on cuDNN's fused
// scaled-dot-product attention (its FlashAttention-2 engines, reached
// through the backend graph API) instead of dt's kernels in kernels/cuda/.
// The library is opened with dlopen when the CUDA executor starts, as cuBLAS
// is (dtrt/cuda/blas.h): $DT_CUDNN_LIBRARY when set, else libcudnn.so.9 on
// the loader's path, $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
//
// cuDNN computes what dt.attention and dt.attention_grad define:
//   S = Q K^T / sqrt(d), masked causally (query i sees keys j <= i),
//   O = softmax(S) V, lse = the rows' natural log-sum-exp of S (f32),
//   and from O, lse and dO the gradients dQ, dK, dV,
// on [b, h, s, d] operands with any strides (d contiguous). Each shape's
// execution plan is built once, before the first step (its engines compile
// kernels then: none of that may happen inside a CUDA graph's capture), and
// each call's variant pack (its pointers) is kept.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CUDA_CUDNN_H
#define DTRT_CUDA_CUDNN_H

#include "dtrt/cuda/blas.h" // Operands
#include "dtrt/cuda/plan.h" // Thunk
#include "dtrt/error.h"

#include <cuda_runtime.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dtrt::cuda {

class CudnnDescriptor; // runtime/lib/cuda/cudnn_api.h

/// One attention (or its gradient) as cuDNN's SDPA graphs take it.
struct Sdpa {
  /// The gradient's graph (q, k, v, o, lse, dO -> dQ, dK, dV) or the
  /// forward's (q, k, v -> o, lse).
  bool backward = false;
  int64_t batch = 0, heads = 0, t = 0, d = 0;
  bool causal = true;
  /// BF16 or F16: every operand but lse, which is f32 [batch, heads, t].
  Operands type = Operands::BF16;
  /// The gradient's dQ summed in a fixed order (cuDNN's deterministic
  /// graph, which writes dQ directly), rather than with atomics into an f32
  /// buffer, which is faster but differs from run to run in the last bits.
  bool deterministic = false;
  /// Each operand's batch, head and row strides, in elements (d is
  /// contiguous): q, k, v, o, then for the gradient dO, dQ, dK, dV.
  std::vector<std::array<int64_t, 3>> strides;

  /// A bf16 attention (or gradient) launch of a GPU plan as cuDNN takes
  /// it, or why not: cuDNN reads and writes 16-bit tensors only (in and
  /// out bf16), and every operand's layout must split the slices into the
  /// same batches and heads (a layout of one head a batch is [slices, t, d]
  /// and splits as any other).
  static Expected<Sdpa> of(const Thunk &t);

  bool operator<(const Sdpa &o) const;
};

class Cudnn {
public:
  /// Opens cuDNN (9.x) and a handle working on `stream`; an Error says
  /// where it was looked for.
  static Expected<std::unique_ptr<Cudnn>> open(cudaStream_t stream);
  ~Cudnn();
  /// Loads cuDNN and describes `a`'s operations to it without a GPU: every
  /// tensor and operation descriptor set and finalized, which checks their
  /// attributes (the graph, its engines and plan need a device). For tests
  /// on machines without one.
  static Status describe(const Sdpa &a);

  /// "cuDNN 9.19.0", the library loaded.
  std::string version() const;

  /// Builds the execution plan for `a` (or finds the one built for an
  /// attention of the same shape and strides): its index for run(). An
  /// Error says why cuDNN does not take it (an operand's alignment, a head
  /// width, no engine for the graph), and the caller runs its own kernels.
  Expected<int> prepare(const Sdpa &a);
  /// The device memory the prepared plans need at most, allocated once the
  /// plans are known (before any run: a captured graph must not allocate).
  Status allocateWorkspace();

  /// Runs plan `plan` on the stream with these device pointers: q, k, v,
  /// o, lse (the forward), or q, k, v, o, lse, dO, dQ, dK, dV (the
  /// gradient). Each distinct set of pointers' variant pack is made once.
  Status run(int plan, const std::vector<void *> &pointers);

  /// Plans built and calls' variant packs kept, for the start-up note.
  size_t plans() const;

private:
  Cudnn() = default;
  /// Opens the library and binds its entry points, without a handle.
  static Expected<std::unique_ptr<Cudnn>> load();
  struct Api;
  struct Graph;
  Status build(const Sdpa &a, Graph &g);

  void *library_ = nullptr;
  std::unique_ptr<Api> api_;
  void *handle_ = nullptr;
  std::map<Sdpa, int> planOf_;
  std::vector<std::unique_ptr<Graph>> graphs_;
  std::map<std::pair<int, std::vector<void *>>,
           std::unique_ptr<CudnnDescriptor>>
      packs_;
  void *workspace_ = nullptr;
  int64_t workspaceBytes_ = 0;
};

} // namespace dtrt::cuda

#endif // DTRT_CUDA_CUDNN_H
