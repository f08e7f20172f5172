//===- KernelFootprint.cpp - the bytes each kernel call touches -----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// One row per kernel of kernels/include/dtk/kernels.h: its argument count, and
// for each pointer argument the elements it spans times their size. Products
// are checked for overflow, so an absurd size is reported rather than wrapped
// into a small, plausible footprint.
//
//===----------------------------------------------------------------------===//

#include "dt/Conversion/KernelFootprint.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <functional>

using namespace mlir;

namespace {

/// Reads a kernel's integer arguments and multiplies them without wrapping.
class Sizes {
public:
  Sizes(llvm::ArrayRef<std::optional<int64_t>> args, std::string &why)
      : args(args), why(why) {}

  /// Argument `i`, which must be a non-negative constant.
  int64_t arg(unsigned i) {
    if (!args[i] || *args[i] < 0) {
      if (why.empty())
        why = "argument " + std::to_string(i) +
              (args[i] ? " is negative" : " is not a constant");
      return 0;
    }
    return *args[i];
  }

  /// The product of `factors`, or 0 with `why` set when it overflows.
  int64_t mul(std::initializer_list<int64_t> factors) {
    int64_t p = 1;
    for (int64_t f : factors)
      if (llvm::MulOverflow(p, f, p)) {
        if (why.empty())
          why = "its footprint overflows 64 bits";
        return 0;
      }
    return p;
  }

private:
  llvm::ArrayRef<std::optional<int64_t>> args;
  std::string &why;
};

struct Row {
  unsigned numArgs;
  std::function<llvm::SmallVector<int64_t>(Sizes &)> footprint;
};

constexpr int64_t kF32 = 4, kI32 = 4;

/// A, B, (the bias,) C of a product kernel, whose sizes follow the pointers:
/// batch, m, n, k.
llvm::SmallVector<int64_t> productFootprint(Sizes &s, bool withBias) {
  unsigned at = withBias ? 4 : 3;
  int64_t batch = s.arg(at), m = s.arg(at + 1), n = s.arg(at + 2),
          k = s.arg(at + 3);
  llvm::SmallVector<int64_t> bytes{s.mul({batch, m, k, kF32}),
                                   s.mul({batch, k, n, kF32})};
  if (withBias)
    bytes.push_back(s.mul({n, kF32}));
  bytes.push_back(s.mul({batch, m, n, kF32}));
  return bytes;
}

const llvm::StringMap<Row> &table() {
  static const llvm::StringMap<Row> rows = [] {
    llvm::StringMap<Row> t;
    // (a, b, c, batch, m, n, k, trans_a, trans_b): C = op(A) op(B), M x N.
    t["dtk_matmul_f32"] = {9, [](Sizes &s) {
                             return productFootprint(s, /*withBias=*/false);
                           }};
    // (a, b, bias, c, batch, m, n, k, trans_a, trans_b): the same plus the
    // bias, N values, on every row.
    t["dtk_matmul_bias_f32"] = {10, [](Sizes &s) {
                                  return productFootprint(s, /*withBias=*/true);
                                }};
    // (x, y, outer, n, inner)
    t["dtk_softmax_f32"] = {5, [](Sizes &s) {
                              int64_t all =
                                  s.mul({s.arg(2), s.arg(3), s.arg(4), kF32});
                              return llvm::SmallVector<int64_t>{all, all};
                            }};
    // (x, w, b, y, rows, cols, eps)
    t["dtk_layer_norm_f32"] = {7, [](Sizes &s) {
                                 int64_t rows = s.arg(4), cols = s.arg(5);
                                 int64_t x = s.mul({rows, cols, kF32}),
                                         w = s.mul({cols, kF32});
                                 return llvm::SmallVector<int64_t>{x, w, w, x};
                               }};
    // (x, w, dy, dx, dw, db, rows, cols, eps)
    t["dtk_layer_norm_grad_f32"] = {
        9, [](Sizes &s) {
          int64_t rows = s.arg(6), cols = s.arg(7);
          int64_t x = s.mul({rows, cols, kF32}), w = s.mul({cols, kF32});
          return llvm::SmallVector<int64_t>{x, w, x, x, w, w};
        }};
    // (x, y, outer, t, d, theta, factor, low_freq_factor, high_freq_factor,
    //  original, inverse)
    t["dtk_rope_f32"] = {11, [](Sizes &s) {
                           int64_t all =
                               s.mul({s.arg(2), s.arg(3), s.arg(4), kF32});
                           return llvm::SmallVector<int64_t>{all, all};
                         }};
    // (a, b, out, n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw,
    //  groups): x [n, c, h, w], weight [o, c / groups, kh, kw], y [n, o, oh,
    //  ow] in the order each kernel takes them.
    auto conv = [](int x, int w, int y) {
      return Row{19, [=](Sizes &s) {
                          int64_t n = s.arg(3), c = s.arg(4), o = s.arg(7);
                          int64_t groups = s.arg(18) > 0 ? s.arg(18) : 1;
                          int64_t bytes[3] = {
                              s.mul({n, c, s.arg(5), s.arg(6), kF32}),
                              s.mul({o, c / groups, s.arg(8), s.arg(9), kF32}),
                              s.mul({n, o, s.arg(10), s.arg(11), kF32})};
                          return llvm::SmallVector<int64_t>{
                              bytes[x], bytes[w], bytes[y]};
                        }};
    };
    t["dtk_conv2d_f32"] = conv(0, 1, 2);
    t["dtk_conv2d_input_grad_f32"] = conv(2, 1, 0);
    t["dtk_conv2d_weight_grad_f32"] = conv(0, 2, 1);
    // (tensors..., planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw): each tensor
    // an input-sized ('i') or output-sized ('o') plane stack.
    auto pool = [](llvm::StringRef tensors) {
      unsigned k = tensors.size();
      std::string which = tensors.str();
      return Row{k + 11, [=](Sizes &s) {
                   int64_t planes = s.arg(k);
                   int64_t in = s.mul({planes, s.arg(k + 1), s.arg(k + 2), kF32}),
                           out = s.mul({planes, s.arg(k + 3), s.arg(k + 4), kF32});
                   llvm::SmallVector<int64_t> bytes;
                   for (char t : which)
                     bytes.push_back(t == 'i' ? in : out);
                   return bytes;
                 }};
    };
    t["dtk_max_pool2d_f32"] = pool("io");
    t["dtk_max_pool2d_grad_f32"] = pool("ioi");
    t["dtk_avg_pool2d_f32"] = pool("io");
    t["dtk_avg_pool2d_grad_f32"] = pool("oi");
    // (x, y, n0, n1, n2, n3, s0, s1, s2, s3, base, seed, site, step, p)
    t["dtk_dropout_f32"] = {15, [](Sizes &s) {
                              int64_t all = s.mul({s.arg(2), s.arg(3), s.arg(4),
                                                   s.arg(5), kF32});
                              return llvm::SmallVector<int64_t>{all, all};
                            }};
    // (x, w, y, rows, cols, eps)
    t["dtk_rms_norm_f32"] = {6, [](Sizes &s) {
                               int64_t rows = s.arg(3), cols = s.arg(4);
                               int64_t x = s.mul({rows, cols, kF32}),
                                       w = s.mul({cols, kF32});
                               return llvm::SmallVector<int64_t>{x, w, x};
                             }};
    // (x, w, dy, dx, dw, rows, cols, eps)
    t["dtk_rms_norm_grad_f32"] = {
        8, [](Sizes &s) {
          int64_t rows = s.arg(5), cols = s.arg(6);
          int64_t x = s.mul({rows, cols, kF32}), w = s.mul({cols, kF32});
          return llvm::SmallVector<int64_t>{x, w, x, x, w};
        }};
    // (table, ids, out, n, count, width)
    t["dtk_embedding_f32"] = {6, [](Sizes &s) {
                                int64_t n = s.arg(3), count = s.arg(4),
                                        width = s.arg(5);
                                return llvm::SmallVector<int64_t>{
                                    s.mul({count, width, kF32}),
                                    s.mul({n, kI32}),
                                    s.mul({n, width, kF32})};
                              }};
    // (ids, dout, dtable, n, count, width)
    t["dtk_embedding_grad_f32"] = {6, [](Sizes &s) {
                                     int64_t n = s.arg(3), count = s.arg(4),
                                             width = s.arg(5);
                                     return llvm::SmallVector<int64_t>{
                                         s.mul({n, kI32}),
                                         s.mul({n, width, kF32}),
                                         s.mul({count, width, kF32})};
                                   }};
    // (logits, labels, loss, rows, classes)
    t["dtk_cross_entropy_f32"] = {5, [](Sizes &s) {
                                    int64_t rows = s.arg(3),
                                            classes = s.arg(4);
                                    return llvm::SmallVector<int64_t>{
                                        s.mul({rows, classes, kF32}),
                                        s.mul({rows, kI32}), kF32};
                                  }};
    // (logits, labels, dloss, dlogits, rows, classes)
    t["dtk_cross_entropy_grad_f32"] = {
        6, [](Sizes &s) {
          int64_t rows = s.arg(4), classes = s.arg(5);
          int64_t logits = s.mul({rows, classes, kF32});
          return llvm::SmallVector<int64_t>{logits, s.mul({rows, kI32}), kF32,
                                            logits};
        }};
    // (logits, labels, correct, rows, classes)
    t["dtk_count_correct_f32"] = {5, [](Sizes &s) {
                                    int64_t rows = s.arg(3),
                                            classes = s.arg(4);
                                    return llvm::SmallVector<int64_t>{
                                        s.mul({rows, classes, kF32}),
                                        s.mul({rows, kI32}), kF32};
                                  }};
    // (table, ids, out, n, first, count, total, width); `first` is the rank's
    // and not a constant.
    t["dtk_embedding_shard_f32"] = {8, [](Sizes &s) {
                                      int64_t n = s.arg(3), count = s.arg(5),
                                              width = s.arg(7);
                                      return llvm::SmallVector<int64_t>{
                                          s.mul({count, width, kF32}),
                                          s.mul({n, kI32}),
                                          s.mul({n, width, kF32})};
                                    }};
    // (ids, dout, dtable, n, first, count, total, width)
    t["dtk_embedding_grad_shard_f32"] = {8, [](Sizes &s) {
                                           int64_t n = s.arg(3),
                                                   count = s.arg(5),
                                                   width = s.arg(7);
                                           return llvm::SmallVector<int64_t>{
                                               s.mul({n, kI32}),
                                               s.mul({n, width, kF32}),
                                               s.mul({count, width, kF32})};
                                         }};
    // (logits, labels, stats, rows, classes, first, total)
    t["dtk_class_stats_f32"] = {7, [](Sizes &s) {
                                  int64_t rows = s.arg(3), classes = s.arg(4);
                                  return llvm::SmallVector<int64_t>{
                                      s.mul({rows, classes, kF32}),
                                      s.mul({rows, kI32}),
                                      s.mul({4, rows, kF32})};
                                }};
    // (stats, labels, out, blocks, rows): cross_entropy and count_correct.
    auto fromStats = [](Sizes &s) {
      int64_t blocks = s.arg(3), rows = s.arg(4);
      return llvm::SmallVector<int64_t>{s.mul({blocks, 4, rows, kF32}),
                                        s.mul({rows, kI32}), kF32};
    };
    t["dtk_cross_entropy_stats_f32"] = {5, fromStats};
    t["dtk_count_correct_stats_f32"] = {5, fromStats};
    // (logits, labels, stats, dloss, dlogits, blocks, rows, classes, first,
    //  total)
    t["dtk_cross_entropy_grad_shard_f32"] = {
        10, [](Sizes &s) {
          int64_t blocks = s.arg(5), rows = s.arg(6), classes = s.arg(7);
          int64_t logits = s.mul({rows, classes, kF32});
          return llvm::SmallVector<int64_t>{logits, s.mul({rows, kI32}),
                                            s.mul({blocks, 4, rows, kF32}),
                                            kF32, logits};
        }};
    // (q, k, v, o, lse, slices, t, d, causal)
    t["dtk_attention_f32"] = {
        9, [](Sizes &s) {
          int64_t all = s.mul({s.arg(5), s.arg(6), s.arg(7), kF32});
          int64_t rows = s.mul({s.arg(5), s.arg(6), kF32});
          return llvm::SmallVector<int64_t>{all, all, all, all, rows};
        }};
    // (q, k, v, o, lse, dout, dq, dk, dv, slices, t, d, causal)
    t["dtk_attention_grad_f32"] = {
        13, [](Sizes &s) {
          int64_t all = s.mul({s.arg(9), s.arg(10), s.arg(11), kF32});
          int64_t rows = s.mul({s.arg(9), s.arg(10), kF32});
          return llvm::SmallVector<int64_t>{all, all, all, all, rows,
                                            all, all, all, all};
        }};
    // The collectives of runtime/include/dtrt/collectives.h; `dtype` is the
    // runtime's element type number.
    auto bytes = [](Sizes &s, unsigned dtype) -> int64_t {
      switch (s.arg(dtype)) {
      case 0: // f32
      case 1: // i32
        return 4;
      case 2: // i64
        return 8;
      default: // bf16, f16
        return 2;
      }
    };
    // (src, dst, count, dtype, axes, id)
    t["dtrt_all_reduce"] = {6, [=](Sizes &s) {
                              int64_t all = s.mul({s.arg(2), bytes(s, 3)});
                              return llvm::SmallVector<int64_t>{all, all};
                            }};
    // (src, dst, count, group, dtype, axes, id): src holds `group` blocks.
    t["dtrt_reduce_scatter"] = {7, [=](Sizes &s) {
                                  int64_t block = s.mul({s.arg(2), bytes(s, 4)});
                                  return llvm::SmallVector<int64_t>{
                                      s.mul({block, s.arg(3)}), block};
                                }};
    // (src, dst, count, group, dtype, axes, id): dst holds `group` blocks.
    t["dtrt_all_gather"] = {7, [=](Sizes &s) {
                              int64_t block = s.mul({s.arg(2), bytes(s, 4)});
                              return llvm::SmallVector<int64_t>{
                                  block, s.mul({block, s.arg(3)})};
                            }};
    // (src, dst, count, group, dtype, axes, id): both hold `group` blocks.
    t["dtrt_all_to_all"] = {7, [=](Sizes &s) {
                              int64_t all = s.mul(
                                  {s.arg(2), s.arg(3), bytes(s, 4)});
                              return llvm::SmallVector<int64_t>{all, all};
                            }};
    // (src, dst, total, count, dtype, axes, id)
    t["dtrt_take_shard"] = {7, [=](Sizes &s) {
                              return llvm::SmallVector<int64_t>{
                                  s.mul({s.arg(2), bytes(s, 4)}),
                                  s.mul({s.arg(3), bytes(s, 4)})};
                            }};
    // Asynchronous starts touch what the collective does.
    for (const char *c : {"dtrt_all_reduce", "dtrt_reduce_scatter",
                          "dtrt_all_gather", "dtrt_all_to_all"})
      t[std::string(c) + "_start"] = t[c];
    return t;
  }();
  return rows;
}

} // namespace

bool dt::isKernel(llvm::StringRef name) { return table().count(name); }

FailureOr<llvm::SmallVector<int64_t>>
dt::kernelFootprint(llvm::StringRef kernel,
                    llvm::ArrayRef<std::optional<int64_t>> args,
                    std::string &why) {
  auto it = table().find(kernel);
  if (it == table().end()) {
    why = "'" + kernel.str() + "' is not a kernel of dtk/kernels.h";
    return failure();
  }
  const Row &row = it->second;
  if (args.size() != row.numArgs) {
    why = "it takes " + std::to_string(row.numArgs) + " arguments, not " +
          std::to_string(args.size());
    return failure();
  }
  why.clear();
  Sizes sizes(args, why);
  llvm::SmallVector<int64_t> bytes = row.footprint(sizes);
  if (!why.empty())
    return failure();
  return bytes;
}

FailureOr<llvm::SmallVector<int64_t>>
dt::kernelFootprint(llvm::StringRef kernel, ValueRange args, std::string &why) {
  llvm::SmallVector<std::optional<int64_t>> values;
  for (Value a : args) {
    APInt value;
    bool known = !llvm::isa<LLVM::LLVMPointerType>(a.getType()) &&
                 matchPattern(a, m_ConstantInt(&value)) &&
                 value.getSignificantBits() <= 64;
    values.push_back(known ? std::optional<int64_t>(value.getSExtValue())
                           : std::nullopt);
  }
  return kernelFootprint(kernel, values, why);
}
