//===- Interpreter.cpp - reference evaluator for dt IR --------------------===//
//
// A straightforward evaluator: every op is implemented by the plainest loops
// that state its definition, independent of the kernels and of code generation,
// so that it can serve as the oracle for both. See Interpreter.h.
//
//===----------------------------------------------------------------------===//

#include "dt/Interpreter/Interpreter.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dtk/philox.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cblas.h>
#include <functional>
#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace dt;
using namespace dt::interp;

Tensor::Tensor(ArrayRef<int64_t> s, double fill) : shape(s) {
  int64_t n =
      std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
  data.assign(n, fill);
}

Tensor::Tensor(ArrayRef<int64_t> s, std::vector<double> d)
    : shape(s), data(std::move(d)) {}

namespace {

Tensor scalar(double v) {
  return Tensor(ArrayRef<int64_t>{}, std::vector<double>{v});
}

int64_t product(ArrayRef<int64_t> s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Rounds a value to what an element of `type` can hold.
double roundTo(Type type, double v) {
  if (type.isF32())
    return static_cast<double>(static_cast<float>(v));
  if (type.isF64())
    return v;
  if (type.isF16() || type.isBF16()) {
    // Round to the 16-bit format's precision (to nearest, ties to even). bf16
    // has f32's range; f16's is modelled too, since loss scaling depends on
    // it: below 2^-14 values are multiples of 2^-24, beyond 65504 infinite.
    v = static_cast<double>(static_cast<float>(v));
    if (!std::isfinite(v) || v == 0)
      return v;
    if (type.isF16() && std::abs(v) < std::ldexp(1.0, -14))
      return std::nearbyint(std::ldexp(v, 24)) * std::ldexp(1.0, -24);
    int mantissa = type.isF16() ? 10 : 7;
    int exp;
    double m = std::frexp(v, &exp);
    double scale = std::ldexp(1.0, mantissa + 1);
    double r = std::ldexp(std::nearbyint(m * scale) / scale, exp);
    if (type.isF16() && std::abs(r) > 65504.0)
      return std::copysign(std::numeric_limits<double>::infinity(), r);
    return r;
  }
  if (type.isInteger(32))
    return static_cast<double>(static_cast<int32_t>(static_cast<int64_t>(v)));
  return static_cast<double>(static_cast<int64_t>(v));
}

Tensor roundTensor(Type tensorType, Tensor t) {
  Type elem = llvm::cast<RankedTensorType>(tensorType).getElementType();
  if (elem.isF64())
    return t;
  if (elem.isF32()) {
    for (double &v : t.data)
      v = static_cast<double>(static_cast<float>(v));
    return t;
  }
  for (double &v : t.data)
    v = roundTo(elem, v);
  return t;
}

/// Visits every index of `shape` in row-major order, calling
/// `fn(linear, offset)` where offset is the sum of index * strides: an
/// odometer, so that gathers and scatters need no division per element.
template <typename Fn>
void forEachIndex(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides, Fn fn) {
  int64_t total = product(shape);
  size_t rank = shape.size();
  SmallVector<int64_t> idx(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < total; ++i) {
    fn(i, offset);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

/// `t` broadcast to `shape` under NumPy rules.
Tensor broadcast(const Tensor &t, ArrayRef<int64_t> shape) {
  if (ArrayRef<int64_t>(t.shape) == shape)
    return t;
  Tensor out(shape);
  SmallVector<int64_t> inStrides = stridesOf(t.shape);
  int64_t lead = shape.size() - t.shape.size();
  // A broadcast dimension (missing or of size 1) reads index 0.
  SmallVector<int64_t> src(shape.size(), 0);
  for (size_t d = lead; d < shape.size(); ++d)
    if (t.shape[d - lead] != 1)
      src[d] = inStrides[d - lead];
  forEachIndex(shape, src, [&](int64_t i, int64_t from) {
    out.data[i] = t.data[from];
  });
  return out;
}

/// Views shape as [outer, n, inner] around `axis`.
struct AxisView {
  int64_t outer, n, inner;
  AxisView(ArrayRef<int64_t> shape, int64_t axis)
      : outer(product(shape.take_front(axis))), n(shape[axis]),
        inner(product(shape.drop_front(axis + 1))) {}
  int64_t at(int64_t o, int64_t j, int64_t i) const {
    return (o * n + j) * inner + i;
  }
};

double geluScalar(double x) {
  const double k = 0.7978845608028654, c = 0.044715;
  return 0.5 * x * (1 + std::tanh(k * (x + c * x * x * x)));
}

double geluDerivScalar(double x) {
  const double k = 0.7978845608028654, c = 0.044715;
  double t = std::tanh(k * (x + c * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x);
}

double geluErfScalar(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

double geluErfDerivScalar(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

/// The scalar semantics of an elementwise op: its result from its operands'
/// elements.
using ScalarFn = std::function<double(const double *)>;

/// Scalar semantics of every elementwise op, by op; shared by plain ops and
/// dt.fused. Resolved once per op, then applied to every element.
FailureOr<ScalarFn> elementwise(Operation *op) {
  Type elem =
      llvm::cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
  bool isFloat = llvm::isa<FloatType>(elem);
  return llvm::TypeSwitch<Operation *, FailureOr<ScalarFn>>(op)
      .Case([&](NegOp) {
        return ScalarFn([](const double *a) { return -a[0]; });
      })
      .Case([&](ReluOp) {
        return ScalarFn([](const double *a) { return a[0] > 0 ? a[0] : 0.0; });
      })
      .Case([&](GeluOp) {
        return ScalarFn([](const double *a) { return geluScalar(a[0]); });
      })
      .Case([&](GeluDerivOp) {
        return ScalarFn([](const double *a) { return geluDerivScalar(a[0]); });
      })
      .Case([&](GeluErfOp) {
        return ScalarFn([](const double *a) { return geluErfScalar(a[0]); });
      })
      .Case([&](GeluErfDerivOp) {
        return ScalarFn(
            [](const double *a) { return geluErfDerivScalar(a[0]); });
      })
      .Case([&](TanhOp) {
        return ScalarFn([](const double *a) { return std::tanh(a[0]); });
      })
      .Case([&](SigmoidOp) {
        return ScalarFn(
            [](const double *a) { return 1.0 / (1.0 + std::exp(-a[0])); });
      })
      .Case([&](ExpOp) {
        return ScalarFn([](const double *a) { return std::exp(a[0]); });
      })
      .Case([&](LogOp) {
        return ScalarFn([](const double *a) { return std::log(a[0]); });
      })
      .Case([&](SqrtOp) {
        return ScalarFn([](const double *a) { return std::sqrt(a[0]); });
      })
      .Case([&](StepOp) {
        return ScalarFn([](const double *a) { return a[0] > 0 ? 1.0 : 0.0; });
      })
      .Case([&](ConvertOp) {
        return ScalarFn([isFloat](const double *a) {
          return isFloat ? a[0] : std::trunc(a[0]);
        });
      })
      .Case([&](AddOp) {
        return ScalarFn([](const double *a) { return a[0] + a[1]; });
      })
      .Case([&](SubOp) {
        return ScalarFn([](const double *a) { return a[0] - a[1]; });
      })
      .Case([&](MulOp) {
        return ScalarFn([](const double *a) { return a[0] * a[1]; });
      })
      .Case([&](DivOp) {
        return ScalarFn([isFloat](const double *a) {
          return isFloat ? a[0] / a[1] : std::trunc(a[0] / a[1]);
        });
      })
      .Case([&](PowOp) {
        return ScalarFn([](const double *a) { return std::pow(a[0], a[1]); });
      })
      .Case([&](MaximumOp) {
        return ScalarFn([](const double *a) { return std::max(a[0], a[1]); });
      })
      .Case([&](MinimumOp) {
        return ScalarFn([](const double *a) { return std::min(a[0], a[1]); });
      })
      .Case([&](SelectOp) {
        return ScalarFn(
            [](const double *a) { return a[0] != 0 ? a[1] : a[2]; });
      })
      .Default([&](Operation *) -> FailureOr<ScalarFn> {
        return op->emitOpError("is not elementwise"), failure();
      });
}

/// Applies an elementwise op over operands already of the result's shape.
FailureOr<Tensor> mapElementwise(Operation *op,
                                 ArrayRef<const Tensor *> operands) {
  FailureOr<ScalarFn> fn = elementwise(op);
  if (failed(fn))
    return failure();
  Tensor out(operands.front()->shape);
  SmallVector<double, 3> args(operands.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    for (size_t k = 0; k < operands.size(); ++k)
      args[k] = operands[k]->data[i];
    out.data[i] = (*fn)(args.data());
  }
  return out;
}

Tensor constantTensor(ConstantOp op) {
  auto attr = llvm::cast<DenseElementsAttr>(op.getValue());
  Tensor t(attr.getType().getShape());
  if (attr.isSplat()) {
    double v = llvm::isa<FloatType>(attr.getElementType())
                   ? attr.getSplatValue<APFloat>().convertToDouble()
                   : double(attr.getSplatValue<APInt>().getSExtValue());
    std::fill(t.data.begin(), t.data.end(), v);
    return t;
  }
  if (llvm::isa<FloatType>(attr.getElementType())) {
    int64_t i = 0;
    for (APFloat v : attr.getValues<APFloat>())
      t.data[i++] = v.convertToDouble();
  } else {
    int64_t i = 0;
    for (APInt v : attr.getValues<APInt>())
      t.data[i++] = static_cast<double>(v.getSExtValue());
  }
  return t;
}

/// `x` summed over `axes`, which disappear (the result has `outShape`).
Tensor sumOver(const Tensor &x, ArrayRef<int64_t> axes,
               ArrayRef<int64_t> outShape) {
  Tensor out(outShape);
  // The output offset of each input index: kept dimensions in order.
  SmallVector<int64_t> dst(x.shape.size(), 0);
  int64_t stride = 1;
  for (size_t d = x.shape.size(); d-- > 0;)
    if (!llvm::is_contained(axes, static_cast<int64_t>(d))) {
      dst[d] = stride;
      stride *= x.shape[d];
    }
  forEachIndex(x.shape, dst, [&](int64_t i, int64_t to) {
    out.data[to] += x.data[i];
  });
  return out;
}

Tensor transpose(const Tensor &x, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> outShape, src;
  SmallVector<int64_t> inStrides = stridesOf(x.shape);
  for (int64_t p : perm) {
    outShape.push_back(x.shape[p]);
    src.push_back(inStrides[p]);
  }
  Tensor out(outShape);
  forEachIndex(outShape, src, [&](int64_t i, int64_t from) {
    out.data[i] = x.data[from];
  });
  return out;
}

Tensor matmul(const Tensor &a, const Tensor &b, bool ta, bool tb,
              ArrayRef<int64_t> outShape) {
  size_t r = a.shape.size();
  int64_t batch = product(ArrayRef<int64_t>(a.shape).drop_back(2));
  int64_t m = outShape[r - 2], n = outShape[r - 1];
  int64_t k = ta ? a.shape[r - 2] : a.shape[r - 1];
  int64_t aCols = a.shape[r - 1], bCols = b.shape[r - 1];
  Tensor c(outShape);
  // Double-precision BLAS: an oracle for models of realistic width. Products
  // of 2^31 or more rows are beyond blasint, and beyond what a test runs.
  for (int64_t p = 0; p < batch; ++p)
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
                blasint(k), 1.0, a.data.data() + p * m * k, blasint(aCols),
                b.data.data() + p * k * n, blasint(bCols), 0.0,
                c.data.data() + p * m * n, blasint(n));
  return c;
}

Tensor softmax(const Tensor &x, int64_t axis) {
  AxisView v(x.shape, axis);
  Tensor y(x.shape);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < v.n; ++j)
        mx = std::max(mx, x.data[v.at(o, j, i)]);
      for (int64_t j = 0; j < v.n; ++j)
        sum += std::exp(x.data[v.at(o, j, i)] - mx);
      for (int64_t j = 0; j < v.n; ++j)
        y.data[v.at(o, j, i)] = std::exp(x.data[v.at(o, j, i)] - mx) / sum;
    }
  return y;
}

/// Row statistics of layer norm: mean and 1/sqrt(var + eps) of each row.
void rowStats(const double *row, int64_t n, double eps, double &mean,
              double &rstd, bool rms = false) {
  mean = 0;
  for (int64_t j = 0; j < n && !rms; ++j)
    mean += row[j];
  mean /= n;
  double var = 0;
  for (int64_t j = 0; j < n; ++j)
    var += (row[j] - mean) * (row[j] - mean);
  var /= n;
  rstd = 1.0 / std::sqrt(var + eps);
}

/// Log-softmax probability helpers for one row of logits.
double logSumExp(const double *row, int64_t n) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j)
    mx = std::max(mx, row[j]);
  double s = 0;
  for (int64_t j = 0; j < n; ++j)
    s += std::exp(row[j] - mx);
  return mx + std::log(s);
}

/// Calls f(x, w, y) with the flat indices of every input element, weight
/// element and output element that one tap of a convolution multiplies and
/// adds (taps reading the zero padding skipped), in a fixed order.
template <typename Fn> void forEachTap(const Conv2dShape &s, Fn f) {
  int64_t cg = s.c / s.groups, og = s.o / s.groups;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.o; ++o)
      for (int64_t i = 0; i < s.oh; ++i)
        for (int64_t j = 0; j < s.ow; ++j)
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t u = 0; u < s.kh; ++u)
              for (int64_t v = 0; v < s.kw; ++v) {
                int64_t y = i * s.stride[0] - s.padding[0] + u * s.dilation[0],
                        x = j * s.stride[1] - s.padding[1] + v * s.dilation[1];
                if (y < 0 || y >= s.h || x < 0 || x >= s.w)
                  continue;
                int64_t c = o / og * cg + ci;
                f(((n * s.c + c) * s.h + y) * s.w + x,
                  ((o * cg + ci) * s.kh + u) * s.kw + v,
                  ((n * s.o + o) * s.oh + i) * s.ow + j);
              }
}

/// For each output of a max pooling, the flat input index of its window's
/// first largest element in row-major order (-1 for a window of padding).
std::vector<int64_t> maxPoolChoices(const Conv2dShape &s, const Tensor &x) {
  std::vector<int64_t> at(size_t(s.n * s.c * s.oh * s.ow), -1);
  forEachTap(s, [&](int64_t xi, int64_t, int64_t yi) {
    int64_t &best = at[yi];
    double v = x.data[xi];
    if (best < 0 || v > x.data[best] ||
        (std::isnan(v) && !std::isnan(x.data[best])))
      best = xi;
  });
  return at;
}

/// Attention's scores s (scaled by 1 / sqrt(d)) for slice `bh` into `p`,
/// t x t, -inf where the causal mask hides a key.
void attentionScores(const Tensor &q, const Tensor &k, bool causal, int64_t bh,
                     int64_t t, int64_t d, std::vector<double> &p) {
  double scale = 1.0 / std::sqrt(static_cast<double>(d));
  p.assign(t * t, 0);
  const double *qs = q.data.data() + bh * t * d,
               *ks = k.data.data() + bh * t * d;
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < t; ++j) {
      if (causal && j > i) {
        p[i * t + j] = -std::numeric_limits<double>::infinity();
        continue;
      }
      double s = 0;
      for (int64_t c = 0; c < d; ++c)
        s += qs[i * d + c] * ks[j * d + c];
      p[i * t + j] = s * scale;
    }
}

/// The softmax of slice `bh`'s scores into `p` (t x t) and each row's
/// log-sum-exp into lse[bh * t + i].
void attentionProbs(const Tensor &q, const Tensor &k, bool causal, int64_t bh,
                    int64_t t, int64_t d, std::vector<double> &p, Tensor &lse) {
  attentionScores(q, k, causal, bh, t, d, p);
  for (int64_t i = 0; i < t; ++i) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < t; ++j)
      mx = std::max(mx, p[i * t + j]);
    double sum = 0;
    for (int64_t j = 0; j < t; ++j) {
      p[i * t + j] = (causal && j > i) ? 0.0 : std::exp(p[i * t + j] - mx);
      sum += p[i * t + j];
    }
    for (int64_t j = 0; j < t; ++j)
      p[i * t + j] /= sum;
    lse.data[bh * t + i] = mx + std::log(sum);
  }
}

double scheduleValue(ScheduleOp op, double step, double total) {
  double lr = op.getLr().convertToDouble(),
         warmup = static_cast<double>(op.getWarmup());
  StringRef kind = op.getKind();
  if (kind == "step")
    return lr * std::pow(op.getGamma().convertToDouble(),
                         std::floor((step - 1) /
                                    static_cast<double>(op.getEvery())));
  if (kind == "constant")
    return lr;
  if (warmup > 0 && step <= warmup)
    return lr * step / warmup;
  double span = std::max(1.0, total - warmup);
  double progress = std::min(1.0, std::max(0.0, (step - 1 - warmup) / span));
  if (kind == "cosine") {
    double mn = op.getMin().convertToDouble();
    return mn + (lr - mn) * 0.5 * (1 + std::cos(M_PI * progress));
  }
  double fin = op.getFinal().convertToDouble(); // linear
  return lr + (fin - lr) * progress;
}

/// Evaluates one function body.
class Frame {
public:
  Frame(Interpreter &interp, ModuleOp module)
      : interp(interp), module(module) {}

  FailureOr<std::vector<Tensor>> run(func::FuncOp fn, ArrayRef<Tensor> args) {
    Block &entry = fn.getBody().front();
    if (entry.getNumArguments() != args.size())
      return fn.emitError("expected ")
                 << entry.getNumArguments() << " arguments",
             failure();
    for (auto [arg, t] : llvm::zip(entry.getArguments(), args))
      values[arg] = t;
    return runBlock(entry);
  }

private:
  Interpreter &interp;
  ModuleOp module;
  llvm::DenseMap<Value, Tensor> values;

  const Tensor &get(Value v) { return values[v]; }

  FailureOr<std::vector<Tensor>> runBlock(Block &block) {
    for (Operation &op : block) {
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
        std::vector<Tensor> out;
        for (Value v : ret.getOperands())
          out.push_back(get(v));
        return out;
      }
      if (auto yield = llvm::dyn_cast<YieldOp>(op)) {
        std::vector<Tensor> out;
        for (Value v : yield.getValues())
          out.push_back(get(v));
        return out;
      }
      FailureOr<SmallVector<Tensor>> results = evaluate(&op);
      if (failed(results))
        return failure();
      for (auto [r, t] : llvm::zip(op.getResults(), *results))
        values[r] = roundTensor(r.getType(), std::move(t));
      if (interp.observer)
        observe(op);
    }
    return std::vector<Tensor>{};
  }

  void observe(Operation &op) {
    SmallVector<Tensor> operands, results;
    for (Value v : op.getOperands())
      operands.push_back(get(v));
    for (Value v : op.getResults())
      results.push_back(get(v));
    interp.observer(&op, operands, results);
  }

  FailureOr<SmallVector<Tensor>> evaluate(Operation *op);
  std::optional<SmallVector<Tensor>> evaluatePointwise(FusedOp f);
};

/// How a value is rounded to its element type, decided once per value.
enum class Rounding { None, F32, Other };

Rounding roundingOf(Type type) {
  Type elem = llvm::cast<RankedTensorType>(type).getElementType();
  return elem.isF64() ? Rounding::None
                      : elem.isF32() ? Rounding::F32 : Rounding::Other;
}

/// A dt.fused region evaluated element by element, with the same scalar
/// semantics and rounding as op-at-a-time evaluation but no intermediate
/// tensors: one pass over the iteration space, each operand read where
/// broadcasting puts it, each result written (or summed into its reduction).
/// Nullopt when the body holds an op other than elementwise ops and splat
/// constants (then the caller evaluates it op by op).
std::optional<SmallVector<Tensor>> Frame::evaluatePointwise(FusedOp f) {
  Block &body = f.getBody().front();
  ArrayRef<int64_t> shape = f.getIterationShape();
  // Slots: the block arguments, then one per body op result.
  llvm::DenseMap<Value, unsigned> slot;
  for (BlockArgument a : body.getArguments())
    slot[a] = slot.size();
  struct Step {
    ScalarFn fn;
    SmallVector<unsigned, 3> operands;
    unsigned result;
    Rounding rounding;
    Type elem;
    std::optional<double> constant;
  };
  std::vector<Step> steps;
  for (Operation &op : body.without_terminator()) {
    if (op.getNumResults() != 1)
      return std::nullopt;
    Step step;
    step.result = slot[op.getResult(0)] = slot.size();
    step.rounding = roundingOf(op.getResult(0).getType());
    step.elem = llvm::cast<RankedTensorType>(op.getResult(0).getType())
                    .getElementType();
    if (auto c = llvm::dyn_cast<ConstantOp>(op)) {
      auto attr = llvm::cast<DenseElementsAttr>(c.getValue());
      if (!attr.isSplat())
        return std::nullopt;
      step.constant = constantTensor(c).data.front();
    } else if (op.hasTrait<OpTrait::Elementwise>()) {
      FailureOr<ScalarFn> fn = elementwise(&op);
      if (failed(fn))
        return std::nullopt;
      step.fn = std::move(*fn);
      for (Value v : op.getOperands()) {
        auto it = slot.find(v);
        if (it == slot.end())
          return std::nullopt;
        step.operands.push_back(it->second);
      }
    } else {
      return std::nullopt;
    }
    steps.push_back(std::move(step));
  }
  SmallVector<unsigned> yielded;
  for (Value v : body.getTerminator()->getOperands())
    yielded.push_back(slot.lookup(v));

  // Operands read through broadcast strides over the iteration space.
  SmallVector<const Tensor *> inputs;
  SmallVector<SmallVector<int64_t>> strides;
  for (Value in : f.getInputs()) {
    const Tensor &t = get(in);
    inputs.push_back(&t);
    SmallVector<int64_t> own = stridesOf(t.shape), s(shape.size(), 0);
    int64_t lead = shape.size() - t.shape.size();
    for (size_t d = lead; d < shape.size(); ++d)
      if (t.shape[d - lead] != 1)
        s[d] = own[d - lead];
    strides.push_back(s);
  }
  // Results: full tensors, or their sums over the reduced axes.
  SmallVector<Tensor> results;
  SmallVector<int64_t> out(shape.size(), 0);
  if (f.isReduction()) {
    ArrayRef<int64_t> axes = *f.getReduceAxes();
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;)
      if (!llvm::is_contained(axes, static_cast<int64_t>(d))) {
        out[d] = stride;
        stride *= shape[d];
      }
  } else {
    out = stridesOf(shape);
  }
  for (Value r : f.getResults())
    results.push_back(Tensor(shapeOf(r)));

  std::vector<double> values(slot.size());
  SmallVector<int64_t> idx(shape.size(), 0), at(inputs.size(), 0);
  int64_t outAt = 0, total = product(shape);
  for (int64_t i = 0; i < total; ++i) {
    for (size_t k = 0; k < inputs.size(); ++k)
      values[k] = inputs[k]->data[at[k]];
    for (const Step &step : steps) {
      double v;
      if (step.constant) {
        v = *step.constant;
      } else {
        double args[3];
        for (size_t k = 0; k < step.operands.size(); ++k)
          args[k] = values[step.operands[k]];
        v = step.fn(args);
      }
      if (step.rounding == Rounding::F32)
        v = static_cast<double>(static_cast<float>(v));
      else if (step.rounding == Rounding::Other)
        v = roundTo(step.elem, v);
      values[step.result] = v;
    }
    for (auto [r, y] : llvm::zip(results, yielded))
      r.data[outAt] += values[y];
    // Advance the odometer and every offset with it.
    for (size_t d = shape.size(); d-- > 0;) {
      bool carry = ++idx[d] == shape[d];
      int64_t move = carry ? -(shape[d] - 1) : 1;
      for (size_t k = 0; k < inputs.size(); ++k)
        at[k] += move * strides[k][d];
      outAt += move * out[d];
      if (!carry)
        break;
      idx[d] = 0;
    }
  }
  return results;
}

FailureOr<SmallVector<Tensor>> Frame::evaluate(Operation *op) {
  using Results = SmallVector<Tensor>;
  auto shape = [](Value v) { return shapeOf(v); };
  // Elementwise ops: operands already have the result's shape.
  if (op->hasTrait<OpTrait::Elementwise>()) {
    SmallVector<const Tensor *> operands;
    for (Value v : op->getOperands())
      operands.push_back(&get(v));
    FailureOr<Tensor> r = mapElementwise(op, operands);
    if (failed(r))
      return failure();
    return Results{std::move(*r)};
  }
  return llvm::TypeSwitch<Operation *, FailureOr<Results>>(op)
      .Case([&](ConstantOp c) { return Results{constantTensor(c)}; })
      .Case([&](IotaOp i) {
        Tensor t(shape(i.getResult()));
        for (int64_t k = 0; k < t.numel(); ++k)
          t.data[k] = k;
        return Results{t};
      })
      .Case([&](LoadOp l) -> FailureOr<Results> {
        auto it = interp.globals.find(l.getGlobal().str());
        if (it == interp.globals.end())
          return Results{Tensor(shape(l.getResult()))};
        return Results{it->second};
      })
      .Case([&](StoreOp s) {
        interp.globals[s.getGlobal().str()] = get(s.getValue());
        return Results{};
      })
      .Case([&](BroadcastToOp b) {
        return Results{broadcast(get(b.getInput()), shape(b.getResult()))};
      })
      .Case([&](ReshapeOp r) {
        return Results{Tensor(shape(r.getResult()), get(r.getInput()).data)};
      })
      .Case([&](TransposeOp t) {
        return Results{transpose(get(t.getInput()), t.getPerm())};
      })
      .Case([&](SplitOp s) {
        const Tensor &x = get(s.getInput());
        AxisView v(x.shape, s.getAxis());
        Results out;
        int64_t start = 0;
        for (Value r : s.getResults()) {
          Tensor piece(shape(r));
          int64_t n = shape(r)[s.getAxis()];
          for (int64_t o = 0; o < v.outer; ++o)
            for (int64_t j = 0; j < n; ++j)
              for (int64_t i = 0; i < v.inner; ++i)
                piece.data[(o * n + j) * v.inner + i] =
                    x.data[v.at(o, start + j, i)];
          start += n;
          out.push_back(std::move(piece));
        }
        return out;
      })
      .Case([&](SliceOp s) {
        const Tensor &x = get(s.getInput());
        Tensor out(shape(s.getResult()));
        AxisView in(x.shape, s.getAxis());
        int64_t n = out.shape[s.getAxis()];
        for (int64_t o = 0; o < in.outer; ++o)
          for (int64_t j = 0; j < n; ++j)
            for (int64_t i = 0; i < in.inner; ++i)
              out.data[(o * n + j) * in.inner + i] =
                  x.data[in.at(o, s.getStart() + j, i)];
        return Results{out};
      })
      .Case([&](PadOp p) {
        const Tensor &x = get(p.getInput());
        Tensor out(shape(p.getResult()));
        AxisView v(out.shape, p.getAxis());
        int64_t n = x.shape[p.getAxis()];
        for (int64_t o = 0; o < v.outer; ++o)
          for (int64_t j = 0; j < n; ++j)
            for (int64_t i = 0; i < v.inner; ++i)
              out.data[v.at(o, j, i)] = x.data[(o * n + j) * v.inner + i];
        return Results{out};
      })
      .Case([&](ConcatOp c) {
        Tensor out(shape(c.getResult()));
        AxisView v(out.shape, c.getAxis());
        int64_t start = 0;
        for (Value in : c.getInputs()) {
          const Tensor &x = get(in);
          int64_t n = x.shape[c.getAxis()];
          for (int64_t o = 0; o < v.outer; ++o)
            for (int64_t j = 0; j < n; ++j)
              for (int64_t i = 0; i < v.inner; ++i)
                out.data[v.at(o, start + j, i)] =
                    x.data[(o * n + j) * v.inner + i];
          start += n;
        }
        return Results{out};
      })
      .Case([&](ReduceSumOp r) {
        return Results{
            sumOver(get(r.getInput()), r.getAxes(), shape(r.getResult()))};
      })
      .Case([&](MatmulOp m) {
        return Results{matmul(get(m.getLhs()), get(m.getRhs()),
                              m.getTransposeLhs(), m.getTransposeRhs(),
                              shape(m.getResult()))};
      })
      .Case([&](MatmulBiasOp m) {
        Tensor c = matmul(get(m.getLhs()), get(m.getRhs()), m.getTransposeLhs(),
                          m.getTransposeRhs(), shape(m.getResult()));
        const Tensor &bias = get(m.getBias());
        int64_t n = bias.numel();
        for (int64_t i = 0; i < c.numel(); ++i)
          c.data[i] += bias.data[i % n];
        return Results{c};
      })
      .Case([&](SoftmaxOp s) {
        return Results{softmax(get(s.getInput()), s.getAxis())};
      })
      .Case([&](LayerNormOp l) {
        const Tensor &x = get(l.getInput()), &w = get(l.getWeight()),
                     &b = get(l.getBias());
        int64_t n = x.shape.back(), rows = x.numel() / n;
        Tensor y(x.shape);
        for (int64_t r = 0; r < rows; ++r) {
          double mean, rstd;
          rowStats(&x.data[r * n], n, l.getEps().convertToDouble(), mean, rstd);
          for (int64_t j = 0; j < n; ++j)
            y.data[r * n + j] =
                (x.data[r * n + j] - mean) * rstd * w.data[j] + b.data[j];
        }
        return Results{y};
      })
      .Case([&](LayerNormGradOp l) {
        const Tensor &x = get(l.getInput()), &w = get(l.getWeight()),
                     &g = get(l.getResultGrad());
        int64_t n = x.shape.back(), rows = x.numel() / n;
        Tensor dx(x.shape), dw(w.shape), db(w.shape);
        for (int64_t r = 0; r < rows; ++r) {
          double mean, rstd;
          rowStats(&x.data[r * n], n, l.getEps().convertToDouble(), mean, rstd);
          double meanD = 0, meanDX = 0;
          for (int64_t j = 0; j < n; ++j) {
            double xhat = (x.data[r * n + j] - mean) * rstd;
            double d = g.data[r * n + j] * w.data[j];
            meanD += d;
            meanDX += d * xhat;
            dw.data[j] += g.data[r * n + j] * xhat;
            db.data[j] += g.data[r * n + j];
          }
          meanD /= n;
          meanDX /= n;
          for (int64_t j = 0; j < n; ++j) {
            double xhat = (x.data[r * n + j] - mean) * rstd;
            double d = g.data[r * n + j] * w.data[j];
            dx.data[r * n + j] = rstd * (d - meanD - xhat * meanDX);
          }
        }
        return Results{dx, dw, db};
      })
      .Case([&](RopeOp o) {
        const Tensor &x = get(o.getInput());
        int64_t d = x.shape.back(), t = x.shape[x.shape.size() - 2],
                half = d / 2, rows = x.numel() / d;
        double theta = o.getTheta().convertToDouble(),
               sign = o.getInverse() ? -1 : 1;
        // Each pair's frequency, scaled as dt.rope's `scaling` says.
        std::vector<double> freq(half);
        for (int64_t i = 0; i < half; ++i) {
          double f = std::pow(theta, -2.0 * i / d);
          if (std::optional<ArrayRef<double>> s = o.getScaling();
              s && (*s)[0] != 1.0) {
            double factor = (*s)[0], low = (*s)[1], high = (*s)[2],
                   original = (*s)[3], wavelen = 2 * M_PI / f;
            if (original == 0 || wavelen > original / low) {
              f /= factor;
            } else if (wavelen >= original / high) {
              double smooth = (original / wavelen - low) / (high - low);
              f = (1 - smooth) * f / factor + smooth * f;
            }
          }
          freq[i] = f;
        }
        Tensor y(x.shape);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < half; ++i) {
            double angle = double(r % t) * freq[i];
            double c = std::cos(angle), s = sign * std::sin(angle);
            double lo = x.data[r * d + i], hi = x.data[r * d + i + half];
            y.data[r * d + i] = lo * c - hi * s;
            y.data[r * d + i + half] = hi * c + lo * s;
          }
        return Results{y};
      })
      .Case([&](Conv2dOp c) {
        const Tensor &x = get(c.getInput()), &w = get(c.getWeight());
        Tensor y(shapeOf(c.getResult()));
        forEachTap(c.getConv2dShape(), [&](int64_t xi, int64_t wi, int64_t yi) {
          y.data[yi] += x.data[xi] * w.data[wi];
        });
        return Results{y};
      })
      .Case([&](Conv2dInputGradOp c) {
        const Tensor &dy = get(c.getResultGrad()), &w = get(c.getWeight());
        Tensor dx(shapeOf(c.getInputGrad()));
        forEachTap(c.getConv2dShape(), [&](int64_t xi, int64_t wi, int64_t yi) {
          dx.data[xi] += dy.data[yi] * w.data[wi];
        });
        return Results{dx};
      })
      .Case([&](Conv2dWeightGradOp c) {
        const Tensor &x = get(c.getInput()), &dy = get(c.getResultGrad());
        Tensor dw(shapeOf(c.getWeightGrad()));
        forEachTap(c.getConv2dShape(), [&](int64_t xi, int64_t wi, int64_t yi) {
          dw.data[wi] += x.data[xi] * dy.data[yi];
        });
        return Results{dw};
      })
      .Case([&](MaxPool2dOp p) {
        const Tensor &x = get(p.getInput());
        Tensor y(shapeOf(p.getResult()));
        std::vector<int64_t> at = maxPoolChoices(p.getPool2dShape(), x);
        for (int64_t e = 0; e < y.numel(); ++e)
          y.data[e] = at[e] < 0 ? -std::numeric_limits<double>::infinity()
                                : x.data[at[e]];
        return Results{y};
      })
      .Case([&](MaxPool2dGradOp p) {
        const Tensor &x = get(p.getInput()), &dy = get(p.getResultGrad());
        Tensor dx(x.shape);
        std::vector<int64_t> at = maxPoolChoices(p.getPool2dShape(), x);
        for (int64_t e = 0; e < dy.numel(); ++e)
          if (at[e] >= 0)
            dx.data[at[e]] += dy.data[e];
        return Results{dx};
      })
      .Case([&](AvgPool2dOp p) {
        const Tensor &x = get(p.getInput());
        Tensor y(shapeOf(p.getResult()));
        Conv2dShape s = p.getPool2dShape();
        double scale = 1.0 / double(s.kh * s.kw);
        forEachTap(s, [&](int64_t xi, int64_t, int64_t yi) {
          y.data[yi] += x.data[xi] * scale;
        });
        return Results{y};
      })
      .Case([&](AvgPool2dGradOp p) {
        const Tensor &dy = get(p.getResultGrad());
        Tensor dx(shapeOf(p.getInputGrad()));
        Conv2dShape s = p.getPool2dShape();
        double scale = 1.0 / double(s.kh * s.kw);
        forEachTap(s, [&](int64_t xi, int64_t, int64_t yi) {
          dx.data[xi] += dy.data[yi] * scale;
        });
        return Results{dx};
      })
      .Case([&](DropoutOp o) {
        const Tensor &x = get(o.getInput());
        ArrayRef<int64_t> global = o.getShape();
        size_t rank = x.shape.size();
        SmallVector<int64_t> first(rank, 0), stride(rank, 1);
        for (auto [i, f] : llvm::enumerate(o.getFirsts()))
          first[i] = int64_t(get(f).data[0]);
        for (size_t i = rank; i-- > 1;)
          stride[i - 1] = stride[i] * global[i];
        int64_t count = 1;
        for (int64_t n : global)
          count *= n;
        auto step = uint64_t(get(o.getStep()).data[0]);
        int64_t base = int64_t(get(o.getMicro()).data[0]) * count;
        float p = float(o.getP().convertToDouble());
        uint32_t threshold = dtk_dropout_threshold(p);
        double scale = 1.0f / (1.0f - p); // the kernel's f32 factor
        Tensor y(x.shape);
        for (int64_t e = 0; e < x.numel(); ++e) {
          int64_t g = base, rest = e;
          for (size_t i = rank; i-- > 0;) {
            g += (first[i] + rest % x.shape[i]) * stride[i];
            rest /= x.shape[i];
          }
          uint32_t draws[4];
          dtk_dropout_draws(uint64_t(o.getSeed()), uint32_t(o.getSite()), step,
                            uint64_t(g) >> 2, draws);
          y.data[e] = draws[g & 3] >= threshold ? x.data[e] * scale : 0.0;
        }
        return Results{y};
      })
      .Case([&](RMSNormOp l) {
        const Tensor &x = get(l.getInput()), &w = get(l.getWeight());
        int64_t n = x.shape.back(), rows = x.numel() / n;
        Tensor y(x.shape);
        for (int64_t r = 0; r < rows; ++r) {
          double mean, rstd;
          rowStats(&x.data[r * n], n, l.getEps().convertToDouble(), mean, rstd,
                   /*rms=*/true);
          for (int64_t j = 0; j < n; ++j)
            y.data[r * n + j] = x.data[r * n + j] * rstd * w.data[j];
        }
        return Results{y};
      })
      .Case([&](RMSNormGradOp l) {
        const Tensor &x = get(l.getInput()), &w = get(l.getWeight()),
                     &g = get(l.getResultGrad());
        int64_t n = x.shape.back(), rows = x.numel() / n;
        Tensor dx(x.shape), dw(w.shape);
        for (int64_t r = 0; r < rows; ++r) {
          double mean, rstd;
          rowStats(&x.data[r * n], n, l.getEps().convertToDouble(), mean, rstd,
                   /*rms=*/true);
          double meanDX = 0;
          for (int64_t j = 0; j < n; ++j) {
            double xhat = x.data[r * n + j] * rstd;
            meanDX += g.data[r * n + j] * w.data[j] * xhat;
            dw.data[j] += g.data[r * n + j] * xhat;
          }
          meanDX /= n;
          for (int64_t j = 0; j < n; ++j) {
            double xhat = x.data[r * n + j] * rstd;
            dx.data[r * n + j] =
                rstd * (g.data[r * n + j] * w.data[j] - xhat * meanDX);
          }
        }
        return Results{dx, dw};
      })
      .Case([&](EmbeddingOp e) -> FailureOr<Results> {
        const Tensor &table = get(e.getTable()), &ids = get(e.getIds());
        int64_t count = table.shape[0], width = table.shape[1];
        Tensor out(shape(e.getResult()));
        for (int64_t i = 0; i < ids.numel(); ++i) {
          int64_t id = static_cast<int64_t>(ids.data[i]);
          if (id < 0 || id >= count)
            return e.emitOpError("id ")
                       << id << " is out of range [0, " << count << ")",
                   failure();
          for (int64_t c = 0; c < width; ++c)
            out.data[i * width + c] = table.data[id * width + c];
        }
        return Results{out};
      })
      .Case([&](EmbeddingGradOp e) {
        const Tensor &ids = get(e.getIds()), &g = get(e.getResultGrad());
        Tensor out(shape(e.getTableGrad()));
        int64_t width = out.shape[1];
        for (int64_t i = 0; i < ids.numel(); ++i)
          for (int64_t c = 0; c < width; ++c)
            out.data[static_cast<int64_t>(ids.data[i]) * width + c] +=
                g.data[i * width + c];
        return Results{out};
      })
      .Case([&](CrossEntropyOp c) {
        const Tensor &l = get(c.getLogits()), &y = get(c.getLabels());
        int64_t n = l.shape.back();
        double sum = 0;
        int64_t count = 0;
        for (int64_t r = 0; r < y.numel(); ++r) {
          if (y.data[r] < 0)
            continue;
          sum += logSumExp(&l.data[r * n], n) -
                 l.data[r * n + static_cast<int64_t>(y.data[r])];
          ++count;
        }
        return Results{scalar(count ? sum / count : 0.0)};
      })
      .Case([&](CrossEntropyGradOp c) {
        const Tensor &l = get(c.getLogits()), &y = get(c.getLabels());
        double g = get(c.getResultGrad()).data[0];
        int64_t n = l.shape.back(), count = 0;
        for (double label : y.data)
          count += label >= 0;
        Tensor d(l.shape);
        for (int64_t r = 0; r < y.numel(); ++r) {
          if (y.data[r] < 0)
            continue;
          double lse = logSumExp(&l.data[r * n], n);
          for (int64_t j = 0; j < n; ++j)
            d.data[r * n + j] = std::exp(l.data[r * n + j] - lse) * g / count;
          d.data[r * n + static_cast<int64_t>(y.data[r])] -= g / count;
        }
        return Results{d};
      })
      .Case([&](CountCorrectOp c) {
        const Tensor &l = get(c.getLogits()), &y = get(c.getLabels());
        int64_t n = l.shape.back();
        double correct = 0;
        for (int64_t r = 0; r < y.numel(); ++r) {
          if (y.data[r] < 0)
            continue;
          int64_t best = 0;
          for (int64_t j = 1; j < n; ++j)
            if (l.data[r * n + j] > l.data[r * n + best])
              best = j;
          correct += best == static_cast<int64_t>(y.data[r]);
        }
        return Results{scalar(correct)};
      })
      .Case([&](AttentionOp a) {
        const Tensor &q = get(a.getQuery()), &k = get(a.getKey()),
                     &v = get(a.getValue());
        ArrayRef<int64_t> s = q.shape;
        int64_t t = s[s.size() - 2], d = s.back(), slices = q.numel() / (t * d);
        Tensor o(s), lse(s.drop_back());
        std::vector<double> p;
        for (int64_t bh = 0; bh < slices; ++bh) {
          attentionProbs(q, k, a.getCausal(), bh, t, d, p, lse);
          for (int64_t i = 0; i < t; ++i)
            for (int64_t c = 0; c < d; ++c) {
              double acc = 0;
              for (int64_t j = 0; j < t; ++j)
                acc += p[i * t + j] * v.data[bh * t * d + j * d + c];
              o.data[bh * t * d + i * d + c] = acc;
            }
        }
        return Results{o, lse};
      })
      .Case([&](AttentionGradOp a) {
        const Tensor &q = get(a.getQuery()), &k = get(a.getKey()),
                     &v = get(a.getValue()), &o = get(a.getResult()),
                     &lse = get(a.getLse()), &go = get(a.getResultGrad());
        ArrayRef<int64_t> s = q.shape;
        int64_t t = s[s.size() - 2], d = s.back(), slices = q.numel() / (t * d);
        double scale = 1.0 / std::sqrt(static_cast<double>(d));
        Tensor dq(s), dk(s), dv(s);
        std::vector<double> p, dp(t * t);
        for (int64_t bh = 0; bh < slices; ++bh) {
          int64_t base = bh * t * d;
          // The op's definition: P = exp(s - lse), D = rowsum(dO * O).
          attentionScores(q, k, a.getCausal(), bh, t, d, p);
          for (int64_t i = 0; i < t; ++i)
            for (int64_t j = 0; j < t; ++j)
              p[i * t + j] = std::exp(p[i * t + j] - lse.data[bh * t + i]);
          for (int64_t i = 0; i < t; ++i)
            for (int64_t j = 0; j < t; ++j) {
              double acc = 0;
              for (int64_t c = 0; c < d; ++c)
                acc += go.data[base + i * d + c] * v.data[base + j * d + c];
              dp[i * t + j] = acc;
            }
          for (int64_t j = 0; j < t; ++j)
            for (int64_t c = 0; c < d; ++c) {
              double acc = 0;
              for (int64_t i = 0; i < t; ++i)
                acc += p[i * t + j] * go.data[base + i * d + c];
              dv.data[base + j * d + c] = acc;
            }
          for (int64_t i = 0; i < t; ++i) {
            double rowDot = 0;
            for (int64_t c = 0; c < d; ++c)
              rowDot += go.data[base + i * d + c] * o.data[base + i * d + c];
            for (int64_t j = 0; j < t; ++j) {
              double ds = p[i * t + j] * (dp[i * t + j] - rowDot) * scale;
              for (int64_t c = 0; c < d; ++c) {
                dq.data[base + i * d + c] += ds * k.data[base + j * d + c];
                dk.data[base + j * d + c] += ds * q.data[base + i * d + c];
              }
            }
          }
        }
        return Results{dq, dk, dv};
      })
      .Case([&](ScheduleOp s) {
        return Results{scalar(scheduleValue(s, get(s.getStep()).data[0],
                                            get(s.getTotal()).data[0]))};
      })
      .Case([&](FusedOp f) -> FailureOr<Results> {
        if (std::optional<Results> r = evaluatePointwise(f))
          return std::move(*r);
        // The body on operands broadcast to the iteration shape.
        Block &body = f.getBody().front();
        Frame inner(interp, module);
        for (auto [arg, in] : llvm::zip(body.getArguments(), f.getInputs()))
          inner.values[arg] = broadcast(get(in), f.getIterationShape());
        FailureOr<std::vector<Tensor>> out = inner.runBlock(body);
        if (failed(out))
          return failure();
        Results results;
        for (auto [t, r] : llvm::zip(*out, f.getResults())) {
          if (!f.isReduction()) {
            results.push_back(t);
            continue;
          }
          results.push_back(sumOver(t, *f.getReduceAxes(), shapeOf(r)));
        }
        return results;
      })
      .Default([&](Operation *o) -> FailureOr<Results> {
        return o->emitOpError("is not supported by the interpreter"), failure();
      });
}

} // namespace

FailureOr<std::vector<Tensor>> Interpreter::call(func::FuncOp fn,
                                                 ArrayRef<Tensor> args) {
  Frame frame(*this, module);
  return frame.run(fn, args);
}
