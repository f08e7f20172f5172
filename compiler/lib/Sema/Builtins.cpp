//===- Builtins.cpp - The builtin tensor ops and scalar functions ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// One function per builtin of LANGUAGE.md: bind the arguments, check dtypes and
// shapes (symbolically when generic), compute the result type and, when
// tracing, emit the primitive op with attributes resolved (a transpose's
// permutation, reshape's -1, a split's parts). The math functions also work on
// numbers, for expressions such as `1 / sqrt(in)` in initialisers.
//
//===----------------------------------------------------------------------===//

#include "Eval.h"
#include "TensorOps.h"

#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace dt;
using namespace dt::sema;
using llvm::failure;

namespace {
/// A number as %g writes it: -0.1, 1e-12.
std::string shortNumber(double v) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%g", v);
  return text;
}

/// The evaluated arguments of one builtin call.
class BuiltinCall {
public:
  BuiltinCall(SemaContext &ctx, TensorOps &ops, llvm::StringRef name,
              const ast::CallExpr &call)
      : ctx(ctx), ops(ops), name(name), call(call) {}

  /// Binds and evaluates the arguments; false after an error.
  LogicalResult bind(Evaluator &ev, Frame &frame,
                     llvm::ArrayRef<ParamSpec> specs) {
    FailureOr<std::vector<const ast::Field *>> bound =
        bindCallArgs(ctx, call.getArgs(), specs, name, call.getLoc());
    if (failed(bound))
      return failure();
    fields = *bound;
    for (const ast::Field *field : fields) {
      if (!field) {
        values.emplace_back();
        continue;
      }
      FailureOr<EvalValue> v = ev.eval(*field->value, frame);
      if (failed(v))
        return failure();
      values.push_back(std::move(*v));
    }
    return llvm::success();
  }

  bool given(size_t i) const { return fields[i] != nullptr; }
  const EvalValue &value(size_t i) const { return *values[i]; }
  llvm::SMLoc loc(size_t i) const {
    return fields[i] ? fields[i]->value->getLoc() : call.getLoc();
  }
  bool anyUnknown() const {
    return llvm::any_of(values, [](const std::optional<EvalValue> &v) {
      return v && v->isUnknown();
    });
  }

  /// Requires argument `i` to be a tensor (floating-point when `isFloat`).
  LogicalResult tensor(size_t i, llvm::StringRef what, bool needFloat) {
    const EvalValue &v = value(i);
    if (!v.isTensor()) {
      ctx.error(loc(i), "'" + name + "' needs a tensor for '" + what +
                            "', not " + describe(v, ctx.syms));
      return failure();
    }
    if (needFloat)
      return ops.requireFloat(v, "'" + name.str() + "'", loc(i));
    return llvm::success();
  }

  /// A constant (or symbolic) integer argument.
  FailureOr<SymExpr> integer(size_t i, llvm::StringRef what) {
    const EvalValue &v = value(i);
    if (v.kind != EvalValue::Kind::Int) {
      ctx.error(loc(i), "'" + name + "' needs an integer for '" + what +
                            "', not " + describe(v, ctx.syms));
      return failure();
    }
    return ctx.syms.resolve(v.intValue);
  }

  /// A shape argument written as a list, such as [B, T, heads, width /
  /// heads]. With `inferred`, one dimension may be -1 (the rest of the
  /// element count): its index is returned there and it stands as 1.
  FailureOr<Shape> shape(size_t i, std::optional<size_t> *inferred) {
    const EvalValue &target = value(i);
    if (target.kind != EvalValue::Kind::List &&
        target.kind != EvalValue::Kind::Tuple) {
      ctx.error(loc(i), "'" + name + "' needs the new shape as a list, such "
                                     "as [B, T, heads, width / heads]");
      return failure();
    }
    Shape result;
    const auto *written = llvm::dyn_cast<ast::ListExpr>(fields[i]->value.get());
    for (size_t d = 0; d < target.items.size(); ++d) {
      const EvalValue &item = target.items[d];
      std::string text =
          written && d < written->getItems().size()
              ? " (" + ast::toSource(*written->getItems()[d]) + ")"
              : "";
      if (item.isUnknown()) {
        result.dims.push_back(ctx.syms.symbol("?"));
        continue;
      }
      if (item.kind == EvalValue::Kind::Float && item.floatValue) {
        ctx.error(loc(i), "dimension " + std::to_string(d) +
                              " of the new shape" + text + " is " +
                              std::to_string(*item.floatValue) +
                              ", not an integer");
        return failure();
      }
      if (item.kind != EvalValue::Kind::Int) {
        ctx.error(loc(i), "dimension " + std::to_string(d) +
                              " of the new shape" + text + " is " +
                              describe(item, ctx.syms) + ", not an integer");
        return failure();
      }
      SymExpr dim = ctx.syms.resolve(item.intValue);
      std::optional<int64_t> k = dim.getConstant();
      if (k && *k == -1 && inferred) {
        if (*inferred) {
          ctx.error(loc(i), "'" + name + "' allows one -1 dimension, not two");
          return failure();
        }
        *inferred = d;
        result.dims.push_back(SymExpr(1));
        continue;
      }
      if (k && *k <= 0) {
        ctx.error(loc(i), "dimension " + std::to_string(d) +
                              " of the new shape" + text + " is " +
                              std::to_string(*k) +
                              "; dimensions must be positive");
        return failure();
      }
      result.dims.push_back(dim);
    }
    return result;
  }

  /// An axis argument normalised against `shape`; nullopt when the rank is
  /// not known (generic checks).
  FailureOr<std::optional<int64_t>> axis(size_t i, const Shape &shape,
                                         int64_t defaultAxis) {
    int64_t a = defaultAxis;
    if (given(i)) {
      FailureOr<SymExpr> v = integer(i, "axis");
      if (failed(v))
        return failure();
      std::optional<int64_t> c = v->getConstant();
      if (!c) {
        ctx.error(loc(i), "'" + name + "' needs a constant axis");
        return failure();
      }
      a = *c;
    }
    if (shape.unknownRank)
      return std::optional<int64_t>();
    if (shape.ellipsis >= 0) {
      // Negative axes index the known trailing dims.
      int64_t known = shape.dims.size();
      if (a < 0 && a >= -known)
        return std::optional<int64_t>(a);
      return std::optional<int64_t>();
    }
    FailureOr<int64_t> n = normalizeAxis(ctx, a, shape.dims.size(), loc(i),
                                         "'" + name.str() + "'");
    if (failed(n))
      return failure();
    return std::optional<int64_t>(*n);
  }

  /// A number argument (int or float), nullopt when unknown.
  FailureOr<std::optional<double>> number(size_t i, llvm::StringRef what) {
    const EvalValue &v = value(i);
    if (v.kind == EvalValue::Kind::Float)
      return v.floatValue;
    if (v.kind == EvalValue::Kind::Int) {
      std::optional<int64_t> c = v.intValue.getConstant();
      return c ? std::optional<double>(static_cast<double>(*c)) : std::nullopt;
    }
    if (v.isUnknown())
      return std::optional<double>();
    ctx.error(loc(i), "'" + name + "' needs a number for '" + what + "', not " +
                          describe(v, ctx.syms));
    return failure();
  }

  /// An optional positive number argument (`eps`, `theta`); `otherwise` when
  /// it is absent or not known yet (generic checks).
  FailureOr<double> positive(size_t i, llvm::StringRef what,
                             double otherwise) {
    if (!given(i))
      return otherwise;
    FailureOr<std::optional<double>> v = number(i, what);
    if (failed(v))
      return failure();
    if (*v && **v <= 0) {
      ctx.error(loc(i), "'" + name + "' needs a positive " + what);
      return failure();
    }
    return v->value_or(otherwise);
  }

  /// An optional probability argument in [0, 1) (a dropout's), each of
  /// what the builtin `drops` dropped with it; `otherwise` when it is absent
  /// or not known yet.
  FailureOr<double> probability(size_t i, llvm::StringRef what,
                                llvm::StringRef drops, double otherwise) {
    if (!given(i))
      return otherwise;
    FailureOr<std::optional<double>> v = number(i, what);
    if (failed(v))
      return failure();
    double p = v->value_or(otherwise);
    if (!(p >= 0 && p < 1)) {
      ctx.error(loc(i), "'" + name + "' drops each " + drops +
                            " with probability " + what +
                            ", which must be in [0, 1), not " + shortNumber(p));
      return failure();
    }
    return p;
  }

  SemaContext &ctx;
  TensorOps &ops;
  llvm::StringRef name;
  const ast::CallExpr &call;
  std::vector<const ast::Field *> fields;
  std::vector<std::optional<EvalValue>> values;
};

/// An axis stored for a shape that may carry an ellipsis: `dims` index.
size_t dimIndex(const Shape &shape, int64_t axis) {
  return axis < 0 ? shape.dims.size() + axis : axis;
}

/// The product of all dims, or nullopt on overflow.
std::optional<SymExpr> numElements(const Shape &shape) {
  SymExpr product(1);
  for (const SymExpr &dim : shape.dims) {
    std::optional<SymExpr> next = product.mul(dim);
    if (!next)
      return std::nullopt;
    product = *next;
  }
  return product;
}

PrimOp unaryOp(llvm::StringRef name) {
  return llvm::StringSwitch<PrimOp>(name)
      .Case("relu", PrimOp::Relu)
      .Case("gelu", PrimOp::Gelu)
      .Case("tanh", PrimOp::Tanh)
      .Case("sigmoid", PrimOp::Sigmoid)
      .Case("exp", PrimOp::Exp)
      .Case("log", PrimOp::Log)
      .Default(PrimOp::Sqrt);
}

/// The output size of a convolution's window sliding over `n` positions:
/// PyTorch's floor((n + 2 padding - dilation (kernel - 1) - 1) / stride) + 1.
/// Symbolic sizes give an opaque quotient, the same one for the same
/// expressions (conv2d's result and conv_size in a declared type meet).
std::optional<SymExpr> convOutputSize(SymContext &syms, const SymExpr &n,
                                      const SymExpr &kernel,
                                      const SymExpr &stride,
                                      const SymExpr &padding,
                                      const SymExpr &dilation) {
  // A size bound elsewhere (a data field's run-time size that a declared
  // input fixed) counts as its value.
  std::optional<SymExpr> reach = syms.resolve(kernel).sub(SymExpr(1));
  if (reach)
    reach = reach->mul(syms.resolve(dilation));
  std::optional<SymExpr> span = syms.resolve(padding).mul(SymExpr(2));
  if (span)
    span = span->add(syms.resolve(n));
  if (span && reach)
    span = span->sub(*reach);
  if (span)
    span = span->sub(SymExpr(1));
  if (!span)
    return std::nullopt;
  std::optional<int64_t> num = span->getConstant(),
                         den = syms.resolve(stride).getConstant();
  if (num && den && *den > 0) {
    // Floor division, as Python's: a window that does not fit gives <= 0.
    int64_t q = *num >= 0 ? *num / *den : -((-*num + *den - 1) / *den);
    return SymExpr(q + 1);
  }
  SymContext::Quotient q = syms.divide(*span, stride);
  if (q.kind != SymContext::Quotient::Kind::Exact &&
      q.kind != SymContext::Quotient::Kind::Atom)
    return std::nullopt;
  return q.value.add(SymExpr(1));
}

/// The scalar value of a math function, or an error message.
std::optional<double> scalarMath(llvm::StringRef name, double x,
                                 std::string &error) {
  if (name == "sqrt" && x < 0) {
    error = "sqrt of the negative number " + std::to_string(x);
    return std::nullopt;
  }
  if (name == "log" && x <= 0) {
    error = "log of the non-positive number " + std::to_string(x);
    return std::nullopt;
  }
  double r = llvm::StringSwitch<double>(name)
                 .Case("relu", x > 0 ? x : 0)
                 // GPT-2's tanh approximation, as on tensors (DTScalar.cpp).
                 .Case("gelu", 0.5 * x *
                                   (1 + std::tanh(0.7978845608028654 *
                                                  (x + 0.044715 * x * x * x))))
                 // The exact GELU, gelu(x, approximate = "none").
                 .Case("gelu_erf", 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))))
                 .Case("tanh", std::tanh(x))
                 .Case("sigmoid", 1 / (1 + std::exp(-x)))
                 .Case("exp", std::exp(x))
                 .Case("log", std::log(x))
                 .Default(std::sqrt(x));
  if (!std::isfinite(r)) {
    error = name.str() + " of " + std::to_string(x) + " is not finite";
    return std::nullopt;
  }
  return r;
}
/// adaptive_avg_pool2d(x, size) where a size does not divide the input's:
/// PyTorch's windows, output i of n inputs averaging [floor(i n / o),
/// ceil((i + 1) n / o)), which overlap. An average over a window is the
/// average over its rows of the averages over its columns, so each spatial
/// dimension in turn becomes the concatenation of the means of its window
/// slices: ops that have gradients, sharding rules and GPU kernels already.
/// A trace's sizes are constants; `x` is [N, C, H, W].
FailureOr<EvalValue> adaptiveAvgPool(TensorOps &ops, SemaContext &ctx,
                                     const EvalValue &x,
                                     const std::array<SymExpr, 2> &size,
                                     llvm::SMLoc loc) {
  // Checking a declaration (no trace) needs only the type.
  if (!ops.tracing()) {
    Shape pooled = x.shape;
    pooled.dims[2] = size[0];
    pooled.dims[3] = size[1];
    return EvalValue::getTensor(x.dtype, pooled);
  }
  EvalValue h = x;
  for (int d = 0; d < 2; ++d) {
    int64_t axis = 2 + d;
    std::optional<int64_t> n = ctx.syms.resolve(h.shape.dims[axis])
                                   .getConstant(),
                           o = size[d].getConstant();
    if (!n || !o) {
      ctx.error(loc, "'adaptive_avg_pool2d' with overlapping windows needs a "
                     "constant image size, not " +
                         str(x.dtype, x.shape, ctx.syms));
      return failure();
    }
    std::vector<EvalValue> means;
    for (int64_t i = 0; i < *o; ++i) {
      int64_t start = i * *n / *o, end = ((i + 1) * *n + *o - 1) / *o;
      PrimAttrs slice;
      slice.axis = axis;
      slice.start = start;
      slice.count = end - start;
      Shape window = h.shape;
      window.dims[axis] = SymExpr(end - start);
      EvalValue part =
          ops.emit1(PrimOp::Slice, {h}, slice, h.dtype, window, loc);
      PrimAttrs mean;
      mean.axis = axis;
      Shape reduced = window;
      reduced.dims.erase(reduced.dims.begin() + axis);
      EvalValue m =
          ops.emit1(PrimOp::Mean, {part}, mean, h.dtype, reduced, loc);
      Shape kept = window;
      kept.dims[axis] = SymExpr(1);
      means.push_back(ops.reshape(m, kept, loc));
    }
    PrimAttrs concat;
    concat.axis = axis;
    Shape pooled = h.shape;
    pooled.dims[axis] = SymExpr(*o);
    h = means.size() == 1
            ? means[0]
            : ops.emit1(PrimOp::Concat, means, concat, h.dtype, pooled, loc);
  }
  return h;
}
} // namespace

FailureOr<EvalValue> Evaluator::callBuiltin(llvm::StringRef name,
                                            const ast::CallExpr &call,
                                            Frame &frame) {
  TensorOps ops(*this, frame.scope);
  BuiltinCall c(ctx, ops, name, call);
  llvm::SMLoc loc = call.getLoc();
  auto unknownResult = [&]() -> FailureOr<EvalValue> {
    return EvalValue::unknown();
  };

  // --- elementwise activations and math --------------------------------
  if (llvm::is_contained(
          {"relu", "gelu", "tanh", "sigmoid", "exp", "log", "sqrt"}, name)) {
    // gelu's `approximate`, as PyTorch's: "tanh" (GPT-2's, dt's default) or
    // "none" (the exact erf form BERT uses).
    bool isGelu = name == "gelu";
    if (failed(isGelu ? c.bind(*this, frame, {{"x"}, {"approximate", false}})
                      : c.bind(*this, frame, {{"x"}})))
      return failure();
    bool exact = false;
    if (isGelu && c.given(1)) {
      const EvalValue &a = c.value(1);
      if (a.isUnknown())
        return unknownResult();
      if (a.kind != EvalValue::Kind::String || !a.stringValue ||
          (*a.stringValue != "tanh" && *a.stringValue != "none")) {
        ctx.error(c.loc(1), "gelu's approximate is \"tanh\" (GPT-2's "
                            "approximation, the default) or \"none\" (the "
                            "exact erf GELU), but it is " +
                                describe(a, ctx.syms));
        return failure();
      }
      exact = *a.stringValue == "none";
    }
    const EvalValue &x = c.value(0);
    if (x.isUnknown())
      return unknownResult();
    if (x.isNumber()) {
      FailureOr<std::optional<double>> v = c.number(0, "x");
      if (failed(v))
        return failure();
      if (!*v)
        return EvalValue::getFloat(std::nullopt);
      std::string error;
      std::optional<double> r =
          scalarMath(exact ? "gelu_erf" : name, **v, error);
      if (!r) {
        ctx.error(loc, error);
        return failure();
      }
      return EvalValue::getFloat(*r);
    }
    if (failed(c.tensor(0, "x", true)))
      return failure();
    return ops.emit1(exact ? PrimOp::GeluErf : unaryOp(name), {x}, {}, x.dtype,
                     x.shape, loc);
  }

  if (name == "softmax") {
    if (failed(c.bind(*this, frame, {{"x"}, {"axis", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", true)))
      return failure();
    const EvalValue &x = c.value(0);
    FailureOr<std::optional<int64_t>> axis = c.axis(1, x.shape, -1);
    if (failed(axis))
      return failure();
    PrimAttrs attrs;
    attrs.axis = axis->value_or(0);
    return ops.emit1(PrimOp::Softmax, {x}, attrs, x.dtype, x.shape, loc);
  }

  // A window argument of conv2d: an integer for both spatial dimensions or
  // a pair (height, width).
  auto windowPair = [&](size_t i, llvm::StringRef what,
                        int64_t otherwise) -> FailureOr<std::array<SymExpr, 2>> {
    if (!c.given(i))
      return std::array<SymExpr, 2>{SymExpr(otherwise), SymExpr(otherwise)};
    const EvalValue &v = c.value(i);
    if (v.kind == EvalValue::Kind::Int) {
      SymExpr e = ctx.syms.resolve(v.intValue);
      return std::array<SymExpr, 2>{e, e};
    }
    if ((v.kind == EvalValue::Kind::List || v.kind == EvalValue::Kind::Tuple) &&
        v.items.size() == 2 && v.items[0].kind == EvalValue::Kind::Int &&
        v.items[1].kind == EvalValue::Kind::Int)
      return std::array<SymExpr, 2>{ctx.syms.resolve(v.items[0].intValue),
                                    ctx.syms.resolve(v.items[1].intValue)};
    ctx.error(c.loc(i), "'" + name.str() + "' needs an integer or a pair of "
                        "integers (height, width) for '" + what.str() +
                        "', not " + describe(v, ctx.syms));
    return failure();
  };

  if (name == "conv_size") {
    // The output size of a convolution along one dimension, for declared
    // result types: conv_size(H, kernel, stride, padding, dilation).
    if (failed(c.bind(*this, frame,
                      {{"n"},
                       {"kernel"},
                       {"stride", false},
                       {"padding", false},
                       {"dilation", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    llvm::SmallVector<SymExpr, 5> v;
    for (auto [i, what, otherwise] :
         {std::tuple<size_t, const char *, int64_t>{0, "n", 0},
          {1, "kernel", 0},
          {2, "stride", 1},
          {3, "padding", 0},
          {4, "dilation", 1}}) {
      if (!c.given(i)) {
        v.push_back(SymExpr(otherwise));
        continue;
      }
      FailureOr<SymExpr> e = c.integer(i, what);
      if (failed(e))
        return failure();
      v.push_back(*e);
    }
    std::optional<SymExpr> size =
        convOutputSize(ctx.syms, v[0], v[1], v[2], v[3], v[4]);
    if (!size) {
      ctx.error(loc, "'conv_size' cannot compute this size");
      return failure();
    }
    return EvalValue::getInt(*size);
  }

  if (name == "conv2d") {
    // PyTorch's F.conv2d: NCHW, an optional bias per output channel.
    if (failed(c.bind(*this, frame,
                      {{"x"},
                       {"weight"},
                       {"bias", false},
                       {"stride", false},
                       {"padding", false},
                       {"dilation", false},
                       {"groups", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", true)) || failed(c.tensor(1, "weight", true)))
      return failure();
    const EvalValue &x = c.value(0), &weight = c.value(1);
    bool hasBias = c.given(2) && c.value(2).kind != EvalValue::Kind::Absent;
    if (hasBias && failed(c.tensor(2, "bias", true)))
      return failure();
    for (auto [v, what, i] : {std::tuple{&x, "x: [N, C, H, W]", size_t(0)},
                              {&weight, "weight: [O, C / groups, KH, KW]", 1}})
      if (!v->shape.unknownRank &&
          (!v->shape.hasRank() || v->shape.dims.size() != 4)) {
        ctx.error(c.loc(i), "'conv2d' takes " + std::string(what) + ", not " +
                                str(v->dtype, v->shape, ctx.syms));
        return failure();
      }
    FailureOr<std::array<SymExpr, 2>> stride = windowPair(3, "stride", 1),
                                      padding = windowPair(4, "padding", 0),
                                      dilation = windowPair(5, "dilation", 1);
    if (failed(stride) || failed(padding) || failed(dilation))
      return failure();
    SymExpr groups(1);
    if (c.given(6)) {
      FailureOr<SymExpr> g = c.integer(6, "groups");
      if (failed(g))
        return failure();
      groups = *g;
    }
    for (auto [pair, what, least, at] :
         {std::tuple{&*stride, "stride", 1, size_t(3)},
          {&*padding, "padding", 0, 4},
          {&*dilation, "dilation", 1, 5}})
      for (const SymExpr &e : *pair)
        if (std::optional<int64_t> k = e.getConstant(); k && *k < least) {
          ctx.error(c.loc(at), "'conv2d' needs a " + std::string(what) +
                             " of at least " + std::to_string(least) +
                             ", not " + std::to_string(*k));
          return failure();
        }
    if (std::optional<int64_t> g = groups.getConstant(); g && *g < 1) {
      ctx.error(c.loc(6), "'conv2d' needs groups of at least 1");
      return failure();
    }
    if (x.shape.unknownRank || weight.shape.unknownRank)
      return EvalValue::getTensor(x.dtype, Shape::unknown());
    const llvm::SmallVector<SymExpr, 4> &xs = x.shape.dims,
                                        &ws = weight.shape.dims;
    std::optional<SymExpr> channels = ws[1].mul(groups);
    if (channels && ctx.syms.compare(*channels, xs[1]) == SymCmp::Unequal) {
      ctx.error(c.loc(1), "'conv2d' of x with " + ctx.syms.str(xs[1]) +
                              " channels in groups of " +
                              ctx.syms.str(groups) + " needs a weight of " +
                              "[O, " + ctx.syms.str(xs[1]) + " / groups, KH, "
                              "KW], not " + str(weight.shape, ctx.syms));
      return failure();
    }
    std::optional<int64_t> o = ws[0].getConstant(), g = groups.getConstant();
    if (o && g && *o % *g != 0) {
      ctx.error(c.loc(1), "'conv2d' needs output channels (" +
                              std::to_string(*o) + ") that the " +
                              std::to_string(*g) + " groups divide");
      return failure();
    }
    Shape out;
    out.dims = {xs[0], ws[0]};
    for (int d = 0; d < 2; ++d) {
      std::optional<SymExpr> size =
          convOutputSize(ctx.syms, xs[2 + d], ws[2 + d], (*stride)[d],
                         (*padding)[d], (*dilation)[d]);
      if (!size) {
        ctx.error(loc, "'conv2d' cannot compute its output size");
        return failure();
      }
      if (std::optional<int64_t> k = size->getConstant(); k && *k < 1) {
        ctx.error(loc, "'conv2d' slides a " + ctx.syms.str(ws[2]) + "x" +
                           ctx.syms.str(ws[3]) + " window over " +
                           str(x.shape, ctx.syms) +
                           ", which it does not fit (with this padding and "
                           "dilation)");
        return failure();
      }
      out.dims.push_back(*size);
    }
    PrimAttrs attrs;
    if (ops.tracing()) {
      // A trace knows every argument's value.
      for (auto [pair, into] : {std::pair{&*stride, &attrs.stride},
                                {&*padding, &attrs.padding},
                                {&*dilation, &attrs.dilation}})
        for (const SymExpr &e : *pair) {
          std::optional<int64_t> k = e.getConstant();
          if (!k) {
            ctx.error(loc, "'conv2d' needs constant strides, padding and "
                           "dilation");
            return failure();
          }
          into->push_back(*k);
        }
      std::optional<int64_t> k = groups.getConstant();
      if (!k) {
        ctx.error(c.loc(6), "'conv2d' needs a constant number of groups");
        return failure();
      }
      attrs.groups = *k;
    }
    EvalValue y =
        ops.emit1(PrimOp::Conv2d, {x, weight}, attrs, x.dtype, out, loc);
    if (!hasBias)
      return y;
    const EvalValue &bias = c.value(2);
    if (!bias.shape.unknownRank &&
        (!bias.shape.hasRank() || bias.shape.dims.size() != 1 ||
         ctx.syms.compare(bias.shape.dims[0], ws[0]) == SymCmp::Unequal)) {
      ctx.error(c.loc(2), "'conv2d' adds a bias per output channel, so it "
                          "must be [" + ctx.syms.str(ws[0]) + "], not " +
                              str(bias.shape, ctx.syms));
      return failure();
    }
    Shape column;
    column.dims = {ws[0], SymExpr(1), SymExpr(1)};
    return ops.binary(ast::BinaryOp::Add, y, ops.reshape(bias, column, loc),
                      loc);
  }

  if (name == "max_pool2d" || name == "avg_pool2d" ||
      name == "adaptive_avg_pool2d") {
    // PyTorch's poolings, NCHW. The adaptive one is an average pooling
    // whose windows tile the image when the sizes divide; otherwise its
    // windows overlap (adaptivePool).
    bool adaptive = name == "adaptive_avg_pool2d";
    std::vector<ParamSpec> specs = {{"x"}};
    if (adaptive)
      specs.push_back({"output_size"});
    else
      specs.insert(specs.end(),
                   {{"kernel"}, {"stride", false}, {"padding", false}});
    if (failed(c.bind(*this, frame, specs)))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", true)))
      return failure();
    const EvalValue &x = c.value(0);
    if (x.shape.unknownRank)
      return EvalValue::getTensor(x.dtype, Shape::unknown());
    if (!x.shape.hasRank() || x.shape.dims.size() != 4) {
      ctx.error(c.loc(0), "'" + name.str() + "' takes x: [N, C, H, W], not " +
                              str(x.dtype, x.shape, ctx.syms));
      return failure();
    }
    const llvm::SmallVector<SymExpr, 4> &xs = x.shape.dims;
    std::array<SymExpr, 2> kernel, stride, padding{SymExpr(0), SymExpr(0)};
    Shape out;
    out.dims = {xs[0], xs[1]};
    if (adaptive) {
      FailureOr<std::array<SymExpr, 2>> size =
          windowPair(1, "output_size", 1);
      if (failed(size))
        return failure();
      for (const SymExpr &e : *size)
        if (std::optional<int64_t> v = e.getConstant(); v && *v < 1) {
          ctx.error(c.loc(1), "'adaptive_avg_pool2d' needs an output size of "
                              "at least 1, not " +
                                  std::to_string(*v));
          return failure();
        }
      bool tiles = true;
      for (int d = 0; d < 2; ++d) {
        SymContext::Quotient q = ctx.syms.divide(xs[2 + d], (*size)[d]);
        if (q.kind != SymContext::Quotient::Kind::Exact &&
            q.kind != SymContext::Quotient::Kind::Atom) {
          tiles = false;
        }
        kernel[d] = stride[d] = q.value;
        out.dims.push_back((*size)[d]);
      }
      if (!tiles)
        return adaptiveAvgPool(ops, ctx, x, *size, loc);
    } else {
      FailureOr<std::array<SymExpr, 2>> k = windowPair(1, "kernel", 1);
      if (failed(k))
        return failure();
      kernel = *k;
      FailureOr<std::array<SymExpr, 2>> s = windowPair(2, "stride", 1),
                                        p = windowPair(3, "padding", 0);
      if (failed(s) || failed(p))
        return failure();
      stride = c.given(2) ? *s : kernel;
      padding = *p;
      for (auto [pair, what, least, at] :
           {std::tuple{&kernel, "kernel", 1, size_t(1)},
            {&stride, "stride", 1, 2},
            {&padding, "padding", 0, 3}})
        for (const SymExpr &e : *pair)
          if (std::optional<int64_t> v = e.getConstant(); v && *v < least) {
            ctx.error(c.loc(at), "'" + name.str() + "' needs a " +
                                     std::string(what) + " of at least " +
                                     std::to_string(least) + ", not " +
                                     std::to_string(*v));
            return failure();
          }
      for (int d = 0; d < 2; ++d) {
        std::optional<int64_t> p = padding[d].getConstant(),
                               k = kernel[d].getConstant();
        if (p && k && 2 * *p > *k) {
          ctx.error(c.loc(3), "'" + name.str() + "' pads at most half the "
                                  "window (" + std::to_string(*k / 2) +
                                  " for " + std::to_string(*k) + "), not " +
                                  std::to_string(*p));
          return failure();
        }
        std::optional<SymExpr> size = convOutputSize(
            ctx.syms, xs[2 + d], kernel[d], stride[d], padding[d], SymExpr(1));
        if (!size || (size->getConstant() && *size->getConstant() < 1)) {
          ctx.error(loc, "'" + name.str() + "' slides a " +
                             ctx.syms.str(kernel[0]) + "x" +
                             ctx.syms.str(kernel[1]) + " window over " +
                             str(x.shape, ctx.syms) +
                             ", which it does not fit");
          return failure();
        }
        out.dims.push_back(*size);
      }
    }
    PrimAttrs attrs;
    if (ops.tracing())
      for (auto [pair, into] : {std::pair{&kernel, &attrs.kernel},
                                {&stride, &attrs.stride},
                                {&padding, &attrs.padding}})
        for (const SymExpr &e : *pair) {
          std::optional<int64_t> v = e.getConstant();
          if (!v) {
            ctx.error(loc, "'" + name.str() + "' needs constant windows");
            return failure();
          }
          into->push_back(*v);
        }
    return ops.emit1(name == "max_pool2d" ? PrimOp::MaxPool2d
                                          : PrimOp::AvgPool2d,
                     {x}, attrs, x.dtype, out, loc);
  }

  if (name == "dropout") {
    // Inverted dropout, as torch.nn.functional.dropout; the program's eval
    // pass and eval-mode runs leave x as it is.
    if (failed(c.bind(*this, frame, {{"x"}, {"p", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", true)))
      return failure();
    const EvalValue &x = c.value(0);
    PrimAttrs attrs;
    FailureOr<double> p = c.probability(1, "p", "element", 0.5);
    if (failed(p))
      return failure();
    attrs.p = *p;
    return ops.emit1(PrimOp::Dropout, {x}, attrs, x.dtype, x.shape, loc);
  }

  if (name == "rope") {
    if (failed(c.bind(*this, frame,
                      {{"x"},
                       {"theta", false},
                       {"factor", false},
                       {"low_freq_factor", false},
                       {"high_freq_factor", false},
                       {"original_max_positions", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", true)))
      return failure();
    const EvalValue &x = c.value(0);
    if (x.shape.hasRank() && x.shape.ellipsis < 0 && x.shape.dims.size() < 2) {
      ctx.error(c.loc(0), "'rope' rotates x: [..., T, D] by the position "
                          "along T, so x needs rank 2 or more, not " +
                              str(x.dtype, x.shape, ctx.syms));
      return failure();
    }
    if (x.shape.hasRank() && !x.shape.dims.empty()) {
      std::optional<int64_t> d =
          ctx.syms.resolve(x.shape.dims.back()).getConstant();
      if (d && *d % 2 != 0) {
        ctx.error(c.loc(0), "'rope' rotates pairs of the last dimension, so "
                            "it must be even, not " +
                                std::to_string(*d));
        return failure();
      }
    }
    PrimAttrs attrs;
    FailureOr<double> theta = c.positive(1, "theta", 10000.0);
    if (failed(theta))
      return failure();
    attrs.theta = *theta;
    // RoPE scaling (Hugging Face's rope_scaling): factor 1 is none; with an
    // original length, LLaMA 3's rule by wavelength, else "linear".
    FailureOr<double> factor = c.positive(2, "factor", 1.0);
    FailureOr<double> low = c.positive(3, "low_freq_factor", 1.0);
    FailureOr<double> high = c.positive(4, "high_freq_factor", 4.0);
    if (failed(factor) || failed(low) || failed(high))
      return failure();
    double original = 0;
    if (c.given(5)) {
      FailureOr<std::optional<double>> n =
          c.number(5, "original_max_positions");
      if (failed(n))
        return failure();
      original = n->value_or(0);
      if (original < 0) {
        ctx.error(c.loc(5), "'rope' needs a non-negative "
                            "original_max_positions (0: linear scaling)");
        return failure();
      }
    }
    if (original > 0 && !(*high > *low)) {
      ctx.error(c.loc(4), "'rope' needs high_freq_factor above "
                          "low_freq_factor");
      return failure();
    }
    if (*factor != 1.0)
      attrs.ropeScaling = {*factor, *low, *high, original};
    return ops.emit1(PrimOp::Rope, {x}, attrs, x.dtype, x.shape, loc);
  }

  if (name == "layer_norm" || name == "rms_norm") {
    // rms_norm is LLaMA's: no centring and no bias; eps defaults as there.
    bool rms = name == "rms_norm";
    std::vector<ParamSpec> specs = {{"x"}, {"weight"}};
    if (!rms)
      specs.push_back({"bias", false});
    specs.push_back({"eps", false});
    size_t epsAt = specs.size() - 1;
    if (failed(c.bind(*this, frame, specs)))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", true)) || failed(c.tensor(1, "weight", true)))
      return failure();
    const EvalValue &x = c.value(0), &weight = c.value(1);
    bool hasBias =
        !rms && c.given(2) && c.value(2).kind != EvalValue::Kind::Absent;
    if (hasBias && failed(c.tensor(2, "bias", true)))
      return failure();
    if (x.shape.dims.empty() && x.shape.ellipsis < 0 && !x.shape.unknownRank) {
      ctx.error(c.loc(0), "'" + name + "' needs a tensor of rank 1 or more");
      return failure();
    }
    for (size_t i : {size_t(1), size_t(2)}) {
      if (i == 2 && !hasBias)
        continue;
      const EvalValue &p = c.value(i);
      if (x.shape.unknownRank || p.shape.unknownRank || x.shape.dims.empty())
        continue;
      if (!p.shape.hasRank() || p.shape.dims.size() != 1 ||
          ctx.syms.compare(p.shape.dims[0], x.shape.dims.back()) ==
              SymCmp::Unequal) {
        ctx.error(c.loc(i), "'" + name + "' normalises the last dimension of " +
                                str(x.dtype, x.shape, ctx.syms) + ", so '" +
                                (i == 1 ? "weight" : "bias") + "' must be [" +
                                ctx.syms.str(x.shape.dims.back()) + "], not " +
                                str(p.shape, ctx.syms));
        return failure();
      }
    }
    PrimAttrs attrs;
    FailureOr<double> eps = c.positive(epsAt, "eps", rms ? 1e-6 : 1e-5);
    if (failed(eps))
      return failure();
    attrs.eps = *eps;
    llvm::SmallVector<EvalValue, 3> operands = {x, weight};
    if (hasBias)
      operands.push_back(c.value(2));
    return ops.emit1(rms ? PrimOp::RmsNorm : PrimOp::LayerNorm, operands, attrs,
                     x.dtype, x.shape, loc);
  }

  if (name == "batch_norm") {
    // PyTorch's batch_norm over dim 1 of [N, C, ...]: in training the
    // batch's statistics normalise and move the running ones (which must be
    // `@buffer` parameters, the state it updates); in eval the running ones
    // normalise.
    if (failed(c.bind(*this, frame,
                      {{"x"},
                       {"weight"},
                       {"bias"},
                       {"running_mean"},
                       {"running_var"},
                       {"momentum", false},
                       {"eps", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    static const char *const kOperands[] = {"x", "weight", "bias",
                                            "running_mean", "running_var"};
    for (size_t i = 0; i < 5; ++i)
      if (failed(c.tensor(i, kOperands[i], true)))
        return failure();
    const EvalValue &x = c.value(0);
    if (x.shape.hasRank() && x.shape.ellipsis < 0 && x.shape.dims.size() < 2) {
      ctx.error(c.loc(0), "'batch_norm' normalises each channel (dim 1) of "
                          "x: [N, C, ...], so x needs rank 2 or more, not " +
                              str(x.dtype, x.shape, ctx.syms));
      return failure();
    }
    bool channelsKnown = x.shape.hasRank() && x.shape.ellipsis < 0;
    for (size_t i = 1; i < 5; ++i) {
      const EvalValue &p = c.value(i);
      if (!channelsKnown || p.shape.unknownRank)
        continue;
      if (!p.shape.hasRank() || p.shape.dims.size() != 1 ||
          ctx.syms.compare(p.shape.dims[0], x.shape.dims[1]) ==
              SymCmp::Unequal) {
        ctx.error(c.loc(i), "'batch_norm' normalises the channels (dim 1) of " +
                                str(x.dtype, x.shape, ctx.syms) + ", so '" +
                                kOperands[i] + "' must be [" +
                                ctx.syms.str(x.shape.dims[1]) + "], not " +
                                str(p.shape, ctx.syms));
        return failure();
      }
    }
    for (size_t i : {size_t(3), size_t(4)}) {
      const InstanceParam *p = c.value(i).param;
      if (p && p->buffer)
        continue;
      ctx.error(c.loc(i),
                std::string("'batch_norm' updates its '") + kOperands[i] +
                    "' while training, so it must be a parameter declared "
                    "@buffer (as nn.BatchNorm2d declares its statistics), " +
                    (p ? "and '" + p->member->getName().str() +
                             "' is not declared @buffer"
                       : std::string("not a computed value")));
      return failure();
    }
    PrimAttrs attrs;
    FailureOr<double> eps = c.positive(6, "eps", 1e-5);
    if (failed(eps))
      return failure();
    attrs.eps = *eps;
    attrs.momentum = 0.1;
    if (c.given(5)) {
      FailureOr<std::optional<double>> m = c.number(5, "momentum");
      if (failed(m))
        return failure();
      attrs.momentum = m->value_or(0.1);
      if (!(attrs.momentum >= 0 && attrs.momentum <= 1)) {
        ctx.error(c.loc(5), "the momentum of 'batch_norm' is the weight of a "
                            "batch's statistics in the running ones, in "
                            "[0, 1], not " +
                                llvm::formatv("{0}", attrs.momentum).str());
        return failure();
      }
    }
    llvm::SmallVector<EvalValue, 5> operands;
    for (size_t i = 0; i < 5; ++i)
      operands.push_back(c.value(i));
    return ops.emit1(PrimOp::BatchNorm, operands, attrs, x.dtype, x.shape, loc);
  }

  if (name == "embedding") {
    if (failed(c.bind(*this, frame, {{"table"}, {"ids"}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "table", true)) || failed(c.tensor(1, "ids", false)))
      return failure();
    const EvalValue &table = c.value(0), &ids = c.value(1);
    if (isFloat(ids.dtype)) {
      ctx.error(c.loc(1), "'embedding' needs integer ids (i32 or i64), not " +
                              str(ids.dtype, ids.shape, ctx.syms));
      return failure();
    }
    if (!table.shape.hasRank() || table.shape.dims.size() != 2) {
      ctx.error(c.loc(0), "'embedding' needs a table of rank 2 [count, width], "
                          "not " +
                              str(table.dtype, table.shape, ctx.syms));
      return failure();
    }
    if (ids.upperBound) {
      // iota(n) ids reach n - 1: provably past the table when n > rows.
      std::optional<SymExpr> excess =
          ctx.syms.resolve(*ids.upperBound)
              .sub(ctx.syms.resolve(table.shape.dims[0]));
      std::optional<int64_t> c = excess ? excess->getConstant() : std::nullopt;
      if (excess && ((c && *c > 0) || (!c && excess->sign() > 0))) {
        SymExpr bound = ctx.syms.resolve(*ids.upperBound);
        std::optional<int64_t> top = bound.getConstant();
        ctx.error(loc, "'embedding' looks up ids " +
                           (top ? "0 to " + std::to_string(*top - 1)
                                : "below " + ctx.syms.str(bound)) +
                           ", but the table has only " +
                           ctx.syms.str(ctx.syms.resolve(table.shape.dims[0])) +
                           " rows");
        return failure();
      }
    }
    Shape result = ids.shape;
    if (!result.unknownRank)
      result.dims.push_back(table.shape.dims[1]);
    return ops.emit1(PrimOp::Embedding, {table, ids}, {}, table.dtype, result,
                     loc);
  }

  if (name == "transpose") {
    if (failed(c.bind(*this, frame, {{"x"}, {"perm", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", false)))
      return failure();
    const EvalValue &x = c.value(0);
    if (x.shape.unknownRank)
      return EvalValue::getTensor(x.dtype, x.shape);
    PrimAttrs attrs;
    Shape result = x.shape;
    if (!c.given(1)) {
      if (x.shape.dims.size() < 2) {
        if (x.shape.ellipsis >= 0)
          return EvalValue::getTensor(x.dtype, Shape::unknown());
        ctx.error(c.loc(0), "'transpose' swaps the last two dimensions and "
                            "needs a tensor of rank 2 or more, not " +
                                str(x.dtype, x.shape, ctx.syms));
        return failure();
      }
      size_t n = result.dims.size();
      std::swap(result.dims[n - 1], result.dims[n - 2]);
      for (size_t i = 0; i < n; ++i)
        attrs.perm.push_back(i);
      std::swap(attrs.perm[n - 1], attrs.perm[n - 2]);
    } else {
      const EvalValue &perm = c.value(1);
      if (perm.kind != EvalValue::Kind::List &&
          perm.kind != EvalValue::Kind::Tuple) {
        ctx.error(c.loc(1), "'transpose' needs 'perm' as a list of axes, such "
                            "as [0, 2, 1, 3]");
        return failure();
      }
      if (!x.shape.hasRank()) {
        ctx.error(c.loc(1), "'transpose' with 'perm' needs a tensor of known "
                            "rank, not " +
                                str(x.dtype, x.shape, ctx.syms));
        return failure();
      }
      size_t n = x.shape.dims.size();
      if (perm.items.size() != n) {
        ctx.error(c.loc(1), "'perm' has " + std::to_string(perm.items.size()) +
                                " axes but the tensor " +
                                str(x.dtype, x.shape, ctx.syms) + " has rank " +
                                std::to_string(n));
        return failure();
      }
      std::vector<bool> seen(n, false);
      result.dims.clear();
      for (const EvalValue &item : perm.items) {
        std::optional<int64_t> axis = item.kind == EvalValue::Kind::Int
                                          ? item.intValue.getConstant()
                                          : std::nullopt;
        if (!axis) {
          ctx.error(c.loc(1), "'perm' must list constant integer axes");
          return failure();
        }
        FailureOr<int64_t> a = normalizeAxis(ctx, *axis, n, c.loc(1), "'perm'");
        if (failed(a))
          return failure();
        if (seen[*a]) {
          ctx.error(c.loc(1), "'perm' names axis " + std::to_string(*a) +
                                  " twice; it must be a permutation");
          return failure();
        }
        seen[*a] = true;
        attrs.perm.push_back(*a);
        result.dims.push_back(x.shape.dims[*a]);
      }
    }
    return ops.emit1(PrimOp::Transpose, {x}, attrs, x.dtype, result, loc);
  }

  if (name == "broadcast_to") {
    // NumPy's: x's dimensions align to the right of the shape; each is 1
    // (repeated) or the shape's.
    if (failed(c.bind(*this, frame, {{"x"}, {"shape"}})))
      return failure();
    if (c.value(0).isUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", false)))
      return failure();
    const EvalValue &x = c.value(0);
    FailureOr<Shape> to = c.shape(1, nullptr);
    if (failed(to))
      return failure();
    if (x.shape.hasRank() && x.shape.ellipsis < 0) {
      std::optional<Shape> joined =
          broadcastShapes(x.shape, *to, ctx.syms, nullptr);
      bool fits = x.shape.dims.size() <= to->dims.size() && joined &&
                  joined->dims.size() == to->dims.size();
      for (size_t d = 0; fits && d < to->dims.size(); ++d)
        fits = ctx.syms.compare(joined->dims[d], to->dims[d]) !=
               SymCmp::Unequal;
      if (!fits) {
        ctx.error(loc, "cannot broadcast " + str(x.dtype, x.shape, ctx.syms) +
                           " to " + str(*to, ctx.syms) +
                           ": each dimension of x must be 1 or the target's, "
                           "aligned to the right");
        return failure();
      }
    }
    return ops.broadcastTo(x, *to, loc);
  }

  if (name == "reshape") {
    if (failed(c.bind(*this, frame, {{"x"}, {"shape"}})))
      return failure();
    if (c.value(0).isUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", false)))
      return failure();
    const EvalValue &x = c.value(0);
    std::optional<size_t> inferred;
    FailureOr<Shape> parsed = c.shape(1, &inferred);
    if (failed(parsed))
      return failure();
    Shape result = std::move(*parsed);
    if (!x.shape.hasRank()) {
      if (inferred)
        result.dims[*inferred] = ctx.syms.symbol("?");
      return EvalValue::getTensor(x.dtype, result);
    }
    std::optional<SymExpr> total = numElements(x.shape);
    std::optional<SymExpr> known = numElements(result);
    if (!total || !known) {
      ctx.error(loc, "integer overflow in the element count of 'reshape'");
      return failure();
    }
    auto mismatch = [&](const std::string &why) {
      std::string target = "[";
      for (size_t i = 0; i < result.dims.size(); ++i)
        target +=
            (i ? ", " : "") +
            (inferred == i ? std::string("-1") : ctx.syms.str(result.dims[i]));
      ctx.error(loc, "cannot reshape " + str(x.dtype, x.shape, ctx.syms) +
                         " (" + ctx.syms.str(*total) + " elements) to " +
                         target + "]: " + why);
      return failure();
    };
    if (inferred) {
      SymContext::Quotient q = ctx.syms.divide(*total, *known);
      if (q.kind != SymContext::Quotient::Kind::Exact &&
          q.kind != SymContext::Quotient::Kind::Atom)
        return mismatch(ctx.syms.str(*known) + " does not divide the element "
                                               "count");
      result.dims[*inferred] = q.value;
    } else if (ctx.syms.compare(*total, *known) == SymCmp::Unequal) {
      return mismatch("the element counts differ");
    }
    return ops.reshape(x, result, loc);
  }

  if (name == "split") {
    if (failed(c.bind(*this, frame, {{"x"}, {"n"}, {"axis", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", false)))
      return failure();
    const EvalValue &x = c.value(0);
    FailureOr<SymExpr> n = c.integer(1, "n");
    if (failed(n))
      return failure();
    std::optional<int64_t> parts = n->getConstant();
    if (!parts) {
      ctx.error(c.loc(1), "'split' needs a constant number of parts");
      return failure();
    }
    if (*parts < 1 || *parts > 4096) {
      ctx.error(c.loc(1), "'split' needs between 1 and 4096 parts, not " +
                              std::to_string(*parts));
      return failure();
    }
    FailureOr<std::optional<int64_t>> axis = c.axis(2, x.shape, -1);
    if (failed(axis))
      return failure();
    EvalValue tuple;
    tuple.kind = EvalValue::Kind::Tuple;
    Shape part = x.shape;
    if (*axis) {
      size_t d = dimIndex(x.shape, **axis);
      SymContext::Quotient q =
          ctx.syms.divide(x.shape.dims[d], SymExpr(*parts));
      if (q.kind != SymContext::Quotient::Kind::Exact &&
          q.kind != SymContext::Quotient::Kind::Atom) {
        ctx.error(loc, "'split' of dimension " + ctx.syms.str(x.shape.dims[d]) +
                           " into " + std::to_string(*parts) +
                           " equal parts: it does not divide");
        return failure();
      }
      part.dims[d] = q.value;
    } else {
      part = Shape::unknown();
    }
    std::vector<EvalValue> results(*parts, EvalValue::getTensor(x.dtype, part));
    PrimAttrs attrs;
    attrs.count = *parts;
    attrs.axis = axis->value_or(0);
    tuple.items = ops.emit(PrimOp::Split, {x}, attrs, results, loc);
    return tuple;
  }

  if (name == "slice") {
    // slice(x, start, end, axis): entries [start, end) of one axis, as
    // x[..., start:end, ...] (constant, non-negative bounds).
    if (failed(
            c.bind(*this, frame, {{"x"}, {"start"}, {"end"}, {"axis", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", false)))
      return failure();
    const EvalValue &x = c.value(0);
    FailureOr<SymExpr> start = c.integer(1, "start");
    FailureOr<SymExpr> end = c.integer(2, "end");
    if (failed(start) || failed(end))
      return failure();
    std::optional<int64_t> s = start->getConstant(), e = end->getConstant();
    if (!s || !e || *s < 0 || *e <= *s) {
      ctx.error(loc, "'slice' needs constant bounds with 0 <= start < end, "
                     "not [" +
                         (s ? std::to_string(*s) : "?") + ", " +
                         (e ? std::to_string(*e) : "?") + ")");
      return failure();
    }
    FailureOr<std::optional<int64_t>> axis = c.axis(3, x.shape, -1);
    if (failed(axis))
      return failure();
    Shape result = x.shape;
    if (*axis) {
      size_t d = dimIndex(x.shape, **axis);
      std::optional<int64_t> dim =
          ctx.syms.resolve(x.shape.dims[d]).getConstant();
      if (dim && *dim < *e) {
        ctx.error(loc, "'slice' keeps entries [" + std::to_string(*s) + ", " +
                           std::to_string(*e) + ") of dim " +
                           std::to_string(d) + ", but " +
                           str(x.dtype, x.shape, ctx.syms) + " has " +
                           std::to_string(*dim) + " there");
        return failure();
      }
      result.dims[d] = SymExpr(*e - *s);
    } else {
      result = Shape::unknown();
    }
    PrimAttrs attrs;
    attrs.axis = axis->value_or(0);
    attrs.start = *s;
    attrs.count = *e - *s;
    return ops.emit1(PrimOp::Slice, {x}, attrs, x.dtype, result, loc);
  }

  if (name == "concat") {
    if (failed(c.bind(*this, frame, {{"xs"}, {"axis", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    const EvalValue &xs = c.value(0);
    if ((xs.kind != EvalValue::Kind::List &&
         xs.kind != EvalValue::Kind::Tuple) ||
        xs.items.empty()) {
      ctx.error(c.loc(0), "'concat' needs a non-empty list of tensors");
      return failure();
    }
    for (const EvalValue &item : xs.items) {
      if (item.isUnknown())
        return unknownResult();
      if (!item.isTensor()) {
        ctx.error(c.loc(0),
                  "'concat' needs tensors, not " + describe(item, ctx.syms));
        return failure();
      }
    }
    const EvalValue &first = xs.items[0];
    FailureOr<std::optional<int64_t>> axis = c.axis(1, first.shape, -1);
    if (failed(axis))
      return failure();
    Shape result = first.shape;
    for (size_t i = 1; i < xs.items.size(); ++i) {
      const EvalValue &item = xs.items[i];
      if (item.dtype != first.dtype) {
        ctx.error(c.loc(0), "'concat' of tensors of different types: " +
                                str(first.dtype, first.shape, ctx.syms) +
                                " and " +
                                str(item.dtype, item.shape, ctx.syms));
        return failure();
      }
      if (!*axis || !item.shape.hasRank() || !first.shape.hasRank()) {
        result = Shape::unknown();
        continue;
      }
      if (item.shape.dims.size() != first.shape.dims.size()) {
        ctx.error(c.loc(0), "'concat' of tensors of different ranks: " +
                                str(first.dtype, first.shape, ctx.syms) +
                                " and " +
                                str(item.dtype, item.shape, ctx.syms));
        return failure();
      }
      for (size_t d = 0; d < result.dims.size(); ++d) {
        if (static_cast<int64_t>(d) == **axis) {
          std::optional<SymExpr> sum = result.dims[d].add(item.shape.dims[d]);
          if (!sum) {
            ctx.error(loc, "integer overflow in 'concat'");
            return failure();
          }
          result.dims[d] = *sum;
        } else if (ctx.syms.compare(result.dims[d], item.shape.dims[d]) ==
                   SymCmp::Unequal) {
          ctx.error(c.loc(0), "'concat' along axis " + std::to_string(**axis) +
                                  " needs equal other dimensions: " +
                                  str(first.dtype, first.shape, ctx.syms) +
                                  " and " +
                                  str(item.dtype, item.shape, ctx.syms));
          return failure();
        }
      }
    }
    PrimAttrs attrs;
    attrs.axis = axis->value_or(0);
    return ops.emit1(PrimOp::Concat, xs.items, attrs, first.dtype, result, loc);
  }

  if (name == "iota") {
    if (failed(c.bind(*this, frame, {{"n"}})))
      return failure();
    if (c.anyUnknown())
      return EvalValue::getTensor(DType::I32, Shape::unknown());
    FailureOr<SymExpr> n = c.integer(0, "n");
    if (failed(n))
      return failure();
    std::optional<int64_t> k = n->getConstant();
    if (k && *k <= 0) {
      ctx.error(c.loc(0),
                "'iota' needs a positive length, not " + std::to_string(*k));
      return failure();
    }
    Shape result;
    result.dims.push_back(*n);
    PrimAttrs attrs;
    attrs.count = k.value_or(0);
    EvalValue ids = ops.emit1(PrimOp::Iota, {}, attrs, DType::I32, result, loc);
    ids.upperBound = *n;
    return ids;
  }

  if (name == "attention") {
    if (failed(c.bind(
            *this, frame,
            {{"q"}, {"k"}, {"v"}, {"causal", false}, {"dropout", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    for (size_t i = 0; i < 3; ++i)
      if (failed(c.tensor(i, i == 0 ? "q" : i == 1 ? "k" : "v", true)))
        return failure();
    const EvalValue &q = c.value(0);
    for (size_t i = 1; i < 3; ++i) {
      const EvalValue &other = c.value(i);
      std::pair<SymExpr, SymExpr> mismatch;
      bool same = other.dtype == q.dtype;
      if (q.shape.hasRank() && other.shape.hasRank())
        same &= q.shape.dims.size() == other.shape.dims.size() &&
                llvm::all_of(llvm::seq<size_t>(0, q.shape.dims.size()),
                             [&](size_t d) {
                               return ctx.syms.compare(q.shape.dims[d],
                                                       other.shape.dims[d]) !=
                                      SymCmp::Unequal;
                             });
      if (!same) {
        ctx.error(c.loc(i), "'attention' needs q, k and v of one type, but q "
                            "is " +
                                str(q.dtype, q.shape, ctx.syms) + " and " +
                                (i == 1 ? "k" : "v") + " is " +
                                str(other.dtype, other.shape, ctx.syms));
        return failure();
      }
    }
    if (!q.shape.unknownRank && q.shape.dims.size() < 3) {
      if (q.shape.ellipsis < 0) {
        ctx.error(c.loc(0), "'attention' works on [..., heads, T, head_dim], "
                            "so q needs rank 3 or more, not " +
                                str(q.dtype, q.shape, ctx.syms));
        return failure();
      }
    }
    PrimAttrs attrs;
    attrs.causal = true;
    if (c.given(3)) {
      const EvalValue &causal = c.value(3);
      if (causal.kind != EvalValue::Kind::Bool) {
        ctx.error(c.loc(3), "'causal' must be true or false");
        return failure();
      }
      attrs.causal = causal.boolValue.value_or(true);
    }
    // Dropout on the attention probabilities, as transformers' attention
    // dropout (attn_pdrop, attention_dropout): a train pass then computes
    // the probabilities in full rather than in the fused kernel.
    FailureOr<double> p = c.probability(4, "dropout", "probability", 0.0);
    if (failed(p))
      return failure();
    attrs.p = *p;
    if (isConcrete() && q.shape.hasRank() && q.shape.dims.size() >= 3)
      if (std::optional<int64_t> heads =
              q.shape.dims[q.shape.dims.size() - 3].getConstant())
        attentionUses.push_back({loc, frame.scope, *heads});
    return ops.emit1(PrimOp::Attention, {q, c.value(1), c.value(2)}, attrs,
                     q.dtype, q.shape, loc);
  }

  if (name == "sum" || name == "mean") {
    if (failed(c.bind(*this, frame, {{"x"}, {"axis", false}})))
      return failure();
    if (c.anyUnknown())
      return unknownResult();
    if (failed(c.tensor(0, "x", name == "mean")))
      return failure();
    EvalValue x = c.value(0);
    PrimOp kind = name == "sum" ? PrimOp::Sum : PrimOp::Mean;
    PrimAttrs attrs;
    if (!c.given(1)) {
      // Over everything: flatten, then reduce the one axis.
      if (x.shape.hasRank()) {
        std::optional<SymExpr> total = numElements(x.shape);
        if (!total) {
          ctx.error(loc, "integer overflow in the element count");
          return failure();
        }
        Shape flat;
        flat.dims.push_back(*total);
        x = ops.reshape(x, flat, loc);
      }
      return ops.emit1(kind, {x}, attrs, x.dtype, Shape::scalar(), loc);
    }
    if (x.shape.hasRank() && x.shape.dims.empty()) {
      ctx.error(c.loc(0), "'" + name +
                              "' over an axis needs a tensor of rank "
                              "1 or more");
      return failure();
    }
    FailureOr<std::optional<int64_t>> axis = c.axis(1, x.shape, 0);
    if (failed(axis))
      return failure();
    Shape result = x.shape;
    if (*axis)
      result.dims.erase(result.dims.begin() + dimIndex(x.shape, **axis));
    else
      result = Shape::unknown();
    attrs.axis = axis->value_or(0);
    return ops.emit1(kind, {x}, attrs, x.dtype, result, loc);
  }

  if (name == "cross_entropy") {
    if (failed(c.bind(*this, frame, {{"logits"}, {"labels"}})))
      return failure();
    if (c.anyUnknown())
      return EvalValue::getTensor(DType::F32, Shape::scalar());
    if (failed(c.tensor(0, "logits", true)) ||
        failed(c.tensor(1, "labels", false)))
      return failure();
    const EvalValue &logits = c.value(0), &labels = c.value(1);
    if (labels.dtype != DType::I32) {
      ctx.error(c.loc(1), "'cross_entropy' needs i32 class labels, not " +
                              str(labels.dtype, labels.shape, ctx.syms));
      return failure();
    }
    const Shape &ls = logits.shape, &ys = labels.shape;
    if (ls.hasRank() && ls.dims.empty()) {
      ctx.error(c.loc(0), "'cross_entropy' needs logits with a class "
                          "dimension, not a scalar");
      return failure();
    }
    bool ok = true;
    if (ls.hasRank() && ys.hasRank()) {
      ok = ys.dims.size() + 1 == ls.dims.size();
      for (size_t d = 0; ok && d < ys.dims.size(); ++d)
        ok = ctx.syms.compare(ys.dims[d], ls.dims[d]) != SymCmp::Unequal;
    }
    if (!ok) {
      Shape expected = ls;
      expected.dims.pop_back();
      ctx.error(c.loc(1),
                "'cross_entropy' of logits " + str(logits.dtype, ls, ctx.syms) +
                    " needs labels of shape " + str(expected, ctx.syms) +
                    ", not " + str(labels.dtype, ys, ctx.syms));
      return failure();
    }
    lastCrossEntropy = {logits, labels};
    return ops.emit1(PrimOp::CrossEntropy, {logits, labels}, {}, DType::F32,
                     Shape::scalar(), loc);
  }

  // mse
  if (failed(c.bind(*this, frame, {{"pred"}, {"target"}})))
    return failure();
  if (c.anyUnknown())
    return EvalValue::getTensor(DType::F32, Shape::scalar());
  if (failed(c.tensor(0, "pred", true)) || failed(c.tensor(1, "target", true)))
    return failure();
  const EvalValue &pred = c.value(0), &target = c.value(1);
  bool ok = pred.dtype == target.dtype;
  if (ok && pred.shape.hasRank() && target.shape.hasRank()) {
    ok = pred.shape.dims.size() == target.shape.dims.size();
    for (size_t d = 0; ok && d < pred.shape.dims.size(); ++d)
      ok = ctx.syms.compare(pred.shape.dims[d], target.shape.dims[d]) !=
           SymCmp::Unequal;
  }
  if (!ok) {
    ctx.error(c.loc(1), "'mse' needs a prediction and a target of one type, "
                        "not " +
                            str(pred.dtype, pred.shape, ctx.syms) + " and " +
                            str(target.dtype, target.shape, ctx.syms));
    return failure();
  }
  return ops.emit1(PrimOp::Mse, {pred, target}, {}, DType::F32, Shape::scalar(),
                   loc);
}
