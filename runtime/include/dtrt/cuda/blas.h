//===- dtrt/cuda/blas.h - cuBLASLt and cuBLAS, opened for a GPU -*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The products of a GPU plan go through cuBLASLt (cuBLAS's classic API where
// cuBLASLt offers no algorithm), which the runtime opens with dlopen when it
// makes the CUDA executor: an emitted program must start on a machine
// without the CUDA libraries, so it cannot link them. Looked for as
// libcublas{Lt}.so.<major of the toolkit dt was built with> on the loader's
// path, then in $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
//
// Shapes are static, so each product's algorithm is chosen once, for its
// shape and its operands' alignments, and kept: the heuristic's first
// choice, or with DTRT_CUDA_PRODUCTS=tuned the fastest of its first few,
// timed on the arena before the program uses it (Executor::tuneProducts).
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CUDA_BLAS_H
#define DTRT_CUDA_BLAS_H

#include "dtrt/error.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

namespace dtrt::cuda {

/// What a GPU plan says about a product's (or attention's) operands: plain
/// f32; f32 holding 16-bit values ("tf32": TF32 tensor cores are exact for
/// them); or stored as 16-bit values ("half").
enum class Operands { F32, TF32, BF16, F16 };

/// What a product's epilogue makes of its f32 sums S = op(A) op(B) (+ bias),
/// with an auxiliary matrix X of C's shape and type, packed (cuBLASLt's GELU
/// epilogues, the tanh approximation: dt.gelu):
///   - Gelu: C = gelu(S), and X = S (the pre-activation backward reads);
///   - GeluGrad: C = S * gelu'(X) (GELU's gradient; X the pre-activation);
/// or beside C = S:
///   - BiasGrad: X is M f32, the sums over k of op(A)'s rows (cuBLASLt's
///     BGRADB, our A being its B): a bias's gradient, with the weight's in
///     C = dY^T x, from the dY that the product reads anyway. A is stored
///     transposed ([K, M], dY's rows), of one batch, without a bias.
enum class Epilogue { None, Gelu, GeluGrad, BiasGrad };

/// dtk_matmul_f32's contract: C = op(A) op(B) (+ bias) for `batch`
/// consecutive row-major matrices; op(A) is M x K, op(B) K x N, the bias a
/// row of N f32 added to every row. With `accumulate`, C += instead of C =.
struct Product {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transA = false, transB = false, accumulate = false;
  Operands operands = Operands::F32;
  /// F32, or the operands' 16-bit type: the f32 sums rounded to it.
  Operands result = Operands::F32;
  /// The row pitches of A, B and C as stored (row-major), in elements; 0:
  /// packed (their column counts). A pitch is the plan's "ld", for a
  /// product of one batch whose rows a pitch keeps 16-byte aligned.
  int64_t lda = 0, ldb = 0, ldc = 0;
  /// The bias's elements, when there is one: f32, or the operands' 16-bit
  /// type.
  Operands bias = Operands::F32;
  /// Of one batch, packed, not accumulating; `aux` is X.
  Epilogue epilogue = Epilogue::None;
};

/// A row-major product as cuBLAS's column-major one: C^T = op(B)^T op(A)^T,
/// so the operands swap and keep their own transposes. cuBLAS's first
/// operand is our B, its second our A, and its M x N result our C^T.
struct ColumnMajor {
  struct Matrix {
    /// The stored matrix, column-major: rows x cols, columns `ld` apart,
    /// batches `stride` elements apart; `transposed`: cuBLAS reads it as
    /// op(X) = X^T.
    int64_t rows, cols, ld, stride;
    bool transposed;
  };
  int64_t m, n, k;
  Matrix first, second, result;
};
ColumnMajor columnMajor(const Product &p);

/// How products are computed: DTRT_CUDA_PRODUCTS=tuned (the default: the
/// fastest of cuBLASLt's candidates, timed before the first step), lt (the
/// heuristic's first, the same every run) or cublas (the classic API). On
/// an H200 the heuristic's first ran GPT-2's 768-row weight gradients at a
/// quarter of the timed choice's speed (bench/results/gpu-2026-11-28b-h200.md).
enum class ProductEngine { Lt, Tuned, Classic };
Expected<ProductEngine> productEngineFromEnvironment();

/// A cuBLASLt algorithm as a cache stores it (its eight words: cuBLASLt's
/// documented way to keep a choice for the same library version), and
/// back; nothing for an entry of another form.
nlohmann::json algoToJson(const cublasLtMatmulAlgo_t &algo);
std::optional<cublasLtMatmulAlgo_t> algoFromJson(const nlohmann::json &j);

class Blas {
public:
  /// Opens cuBLAS (and cuBLASLt, unless `engine` is Classic) and works on
  /// `stream`. Products of f32 operands are computed in f32 (no TF32): the
  /// GPU's losses are the CPU's to rounding.
  static Expected<std::unique_ptr<Blas>>
  open(cudaStream_t stream, ProductEngine engine = ProductEngine::Lt);
  ~Blas();

  /// `p` on device pointers. With Operands::TF32, the f32 operands hold
  /// 16-bit values and the product takes TF32 tensor cores; with BF16 or
  /// F16, `a` and `b` point at 16-bit elements. Either way the products are
  /// exact and summed in f32. `bias` (or null) holds p.bias's elements (f32
  /// or the operands' type), added to the f32 sums before they are rounded
  /// to the result's type. `aux` is p.epilogue's auxiliary matrix. Where
  /// cuBLASLt has no algorithm for a product, or refuses to run the one it
  /// offered (then for the rest of the run, said once on stderr), cuBLAS's
  /// classic API computes it: for an epilogue, it rounds the sums to the
  /// result's type first, and a kernel does the epilogue from there (one
  /// rounding more in 16 bits; a bias's gradient sums A after the product).
  Status matmul(const Product &p, const void *a, const void *b, void *c,
                const void *bias = nullptr, void *aux = nullptr);
  Status matmul(const void *a, const void *b, void *c, int64_t batch, int64_t m,
                int64_t n, int64_t k, bool transA, bool transB, bool accumulate,
                Operands operands, Operands result = Operands::F32) {
    return matmul(
        Product{batch, m, n, k, transA, transB, accumulate, operands, result},
        a, b, c);
  }

  /// With ProductEngine::Tuned, times the heuristic's first candidates for
  /// `p` on these pointers and keeps the fastest for every later product of
  /// its shape and alignments; otherwise chooses as matmul would. Writes
  /// `c` (many times, accumulating or not): it must hold nothing of value.
  Status tune(const Product &p, const void *a, const void *b, void *c,
              const void *bias = nullptr, void *aux = nullptr);

  /// Timed choices of an earlier run on this kind of GPU and cuBLASLt
  /// (entries of timedChoices(), among others): tune() takes a product's
  /// from there when cuBLASLt accepts it for the product's descriptors,
  /// instead of timing, so that a resumed run computes with the same
  /// kernels and gives the same bits.
  void preferChoices(nlohmann::json saved) { saved_ = std::move(saved); }
  /// The choices tune() timed in this run (not those it took from
  /// preferChoices), as cache entries keyed by GPU, cuBLASLt version and
  /// product; and how many it took.
  nlohmann::json timedChoices() const { return timed_; }
  size_t reusedChoices() const { return reused_; }

  /// Which library computed the last product ("cuBLASLt", "cuBLASLt,
  /// tuned", "cuBLAS"), for the profile.
  const char *lastEngine() const { return lastEngine_; }
  ProductEngine engine() const { return engine_; }

private:
  Blas() = default;
  struct Api;
  struct LtApi;
  struct Choice;
  /// A product's shape and its pointers' alignments: what an algorithm
  /// depends on.
  using Key =
      std::tuple<int64_t, int64_t, int64_t, int64_t, int, int, int, int, int,
                 int, int, int, int64_t, int64_t, int64_t, int, int>;
  Key keyOf(const Product &p, const void *a, const void *b, const void *c,
            const void *bias, const void *aux) const;
  Expected<Choice *> choose(const Product &p, const void *a, const void *b,
                            void *c, const void *bias, void *aux, bool timed);
  Status runLt(const Choice &choice, const Product &p, const void *a,
               const void *b, void *c, const void *bias, void *aux);
  /// `choice` computes through the classic API from now on, which a note
  /// on stderr says, with `why`.
  void fallBack(Choice &choice, const Product &p, const char *why);
  Status runClassic(const Product &p, const void *a, const void *b, void *c,
                    const void *bias, void *aux);

  std::unique_ptr<Api> api_;
  std::unique_ptr<LtApi> lt_;
  void *library_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void *workspace_ = nullptr;
  size_t workspaceBytes_ = 0;
  ProductEngine engine_ = ProductEngine::Lt;
  std::map<Key, std::unique_ptr<Choice>> choices_;
  /// "GPU name | cuBLASLt version": what a cached choice is valid for.
  std::string identity_;
  nlohmann::json saved_ = nlohmann::json::object(),
                 timed_ = nlohmann::json::object();
  size_t reused_ = 0;
  const char *lastEngine_ = "cuBLAS";
};

} // namespace dtrt::cuda

#endif // DTRT_CUDA_BLAS_H
