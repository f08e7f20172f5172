//===- ShardingRules.cpp - ShardableOpInterface of the dt ops -------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Each op states its dimensions as factors (dt/Dialect/DT/IR/ShardingRule.h).
// The rules are the math of the op, nothing more: a matmul's contraction is a
// sum (split it and the result is partial), a softmax needs its whole axis, an
// embedding reads any row of its table. Which layouts a program gets is the
// business of dt-shard-propagation; how a split op runs is dt-spmd-partition's.
//
//===----------------------------------------------------------------------===//

#include "dt/Dialect/DT/IR/DTOps.h"

using namespace mlir;
using namespace dt;

using Kind = ShardingRule::FactorKind;
using Linearity = ShardingRule::Linearity;
using Dims = ShardingRule::Dims;

namespace {

ArrayRef<int64_t> shape(Value v) { return shapeOf(v); }

/// The elementwise pattern: one factor per dimension, shared by every operand
/// and the result.
ShardingRule elementwise(Operation *op, Linearity linearity,
                         ArrayRef<bool> linear) {
  ShardingRule r;
  Dims dims = r.addFactors(shape(op->getResult(0)));
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    r.operands.push_back(dims);
  r.results.push_back(dims);
  r.setLinear(linearity, linear);
  return r;
}

/// `dims` with every factor of `leading` prepended: the batch dimensions an op
/// applies over.
Dims withLeading(const Dims &leading, std::initializer_list<int64_t> rest) {
  Dims dims = leading;
  for (int64_t f : rest)
    dims.push_back({f});
  return dims;
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define DT_ELEMENTWISE_RULE(OP, LINEARITY, ...)                                \
  ShardingRule OP::getShardingRule() {                                         \
    return elementwise(*this, LINEARITY, {__VA_ARGS__});                       \
  }

// Sums and differences of partial sums are partial sums; a product or quotient
// is linear in one factor at a time.
DT_ELEMENTWISE_RULE(NegOp, Linearity::Joint, true)
DT_ELEMENTWISE_RULE(AddOp, Linearity::Joint, true, true)
DT_ELEMENTWISE_RULE(SubOp, Linearity::Joint, true, true)
DT_ELEMENTWISE_RULE(MulOp, Linearity::Separate, true, true)
DT_ELEMENTWISE_RULE(DivOp, Linearity::Separate, true, false)
DT_ELEMENTWISE_RULE(PowOp, Linearity::None)
DT_ELEMENTWISE_RULE(MaximumOp, Linearity::None)
DT_ELEMENTWISE_RULE(MinimumOp, Linearity::None)
DT_ELEMENTWISE_RULE(SelectOp, Linearity::None)
DT_ELEMENTWISE_RULE(ReluOp, Linearity::None)
DT_ELEMENTWISE_RULE(GeluOp, Linearity::None)
DT_ELEMENTWISE_RULE(GeluErfOp, Linearity::None)
DT_ELEMENTWISE_RULE(TanhOp, Linearity::None)
DT_ELEMENTWISE_RULE(SigmoidOp, Linearity::None)
DT_ELEMENTWISE_RULE(ExpOp, Linearity::None)
DT_ELEMENTWISE_RULE(LogOp, Linearity::None)
DT_ELEMENTWISE_RULE(SqrtOp, Linearity::None)
DT_ELEMENTWISE_RULE(StepOp, Linearity::None)
DT_ELEMENTWISE_RULE(GeluDerivOp, Linearity::None)
DT_ELEMENTWISE_RULE(GeluErfDerivOp, Linearity::None)
// Rounding to another type does not commute with the sum.
DT_ELEMENTWISE_RULE(ConvertOp, Linearity::None)
// A sum over other ranks keeps the layout of its summand.
DT_ELEMENTWISE_RULE(PipelineSumOp, Linearity::Joint, true)

#undef DT_ELEMENTWISE_RULE

ShardingRule ConstantOp::getShardingRule() {
  // A splat is the same value everywhere, so any piece of it is made locally;
  // other constants stay whole.
  bool splat = cast<DenseElementsAttr>(getValue()).isSplat();
  ShardingRule r;
  r.results.push_back(
      r.addFactors(shape(getResult()), splat ? Kind::Free : Kind::Whole));
  return r;
}

ShardingRule IotaOp::getShardingRule() {
  ShardingRule r;
  r.results.push_back(r.addFactors(shape(getResult()), Kind::Whole));
  return r;
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

ShardingRule BroadcastToOp::getShardingRule() {
  ShardingRule r;
  ArrayRef<int64_t> in = shape(getInput()), out = shape(getResult());
  Dims result = r.addFactors(out);
  Dims operand;
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    operand.push_back(in[i] == out[lead + i] ? result[lead + i]
                                             : ShardingRule::Dim());
  r.operands.push_back(operand);
  r.results.push_back(result);
  r.setLinear(Linearity::Joint, {true});
  return r;
}

ShardingRule ReshapeOp::getShardingRule() {
  // Pair runs of dimensions with equal products. A run of one dimension on one
  // side is the product of the other side's run: it lists their factors, so a
  // split of its major part is a split of the other side's major dimension.
  // Runs of several dimensions on both sides are kept whole.
  ShardingRule r;
  ArrayRef<int64_t> in = shape(getInput()), out = shape(getResult());
  Dims operand(in.size()), result(out.size());
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    if (i < in.size() && in[i] == 1) {
      ++i;
      continue;
    }
    if (j < out.size() && out[j] == 1) {
      ++j;
      continue;
    }
    SmallVector<size_t> gi{i}, gj{j};
    int64_t pi = in[i++], pj = out[j++];
    while (pi != pj) {
      if (pi < pj) {
        gi.push_back(i);
        pi *= in[i++];
      } else {
        gj.push_back(j);
        pj *= out[j++];
      }
    }
    auto spread = [&](ArrayRef<size_t> many, ArrayRef<int64_t> manyShape,
                      Dims &manyDims, size_t one, Dims &oneDims) {
      for (size_t d : many) {
        if (manyShape[d] == 1)
          continue;
        int64_t f = r.addFactor(manyShape[d]);
        manyDims[d] = {f};
        oneDims[one].push_back(f);
      }
    };
    if (gi.size() == 1) {
      spread(gj, out, result, gi[0], operand);
    } else if (gj.size() == 1) {
      spread(gi, in, operand, gj[0], result);
    } else {
      for (size_t d : gi)
        operand[d] = {r.addFactor(in[d], Kind::Whole)};
      for (size_t d : gj)
        result[d] = {r.addFactor(out[d], Kind::Whole)};
    }
  }
  r.operands.push_back(operand);
  r.results.push_back(result);
  r.setLinear(Linearity::Joint, {true});
  return r;
}

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule r;
  Dims operand = r.addFactors(shape(getInput()));
  Dims result;
  for (int64_t p : getPerm())
    result.push_back(operand[p]);
  r.operands.push_back(operand);
  r.results.push_back(result);
  r.setLinear(Linearity::Joint, {true});
  return r;
}

ShardingRule SplitOp::getShardingRule() {
  // The operand's axis is (piece, entry within the piece): each result takes
  // the entry factor, so `3 x tp` on the operand is `tp` on every piece.
  ShardingRule r;
  ArrayRef<int64_t> in = shape(getInput());
  int64_t axis = getAxis(), pieces = getNumResults();
  Dims operand;
  for (auto [d, size] : llvm::enumerate(in))
    operand.push_back({r.addFactor(size)});
  if (!llvm::all_of(getResults(), [&](Value v) {
        return shape(v)[axis] * pieces == in[axis];
      })) {
    // Unequal pieces: the axis stays whole.
    r.factors[operand[axis][0]].kind = Kind::Whole;
    r.operands.push_back(operand);
    for (Value v : getResults()) {
      Dims piece = operand;
      piece[axis] = {r.addFactor(shape(v)[axis], Kind::Whole)};
      r.results.push_back(piece);
    }
    r.setLinear(Linearity::Joint, {true});
    return r;
  }
  int64_t entry = operand[axis][0];
  r.factors[entry].size = in[axis] / pieces;
  operand[axis] = {r.addFactor(pieces, Kind::Whole), entry};
  Dims piece = operand;
  piece[axis] = {entry};
  r.operands.push_back(operand);
  for (int64_t k = 0; k < pieces; ++k)
    r.results.push_back(piece);
  r.setLinear(Linearity::Joint, {true});
  return r;
}

ShardingRule ConcatOp::getShardingRule() {
  ShardingRule r;
  ArrayRef<int64_t> out = shape(getResult());
  int64_t axis = getAxis(), pieces = getInputs().size();
  bool equal = llvm::all_of(getInputs(), [&](Value v) {
    return shape(v)[axis] * pieces == out[axis];
  });
  Dims result = r.addFactors(out);
  SmallVector<bool> linear(pieces, true);
  if (equal) {
    // The mirror of split.
    int64_t entry = result[axis][0];
    r.factors[entry].size = out[axis] / pieces;
    result[axis] = {r.addFactor(pieces, Kind::Whole), entry};
    Dims piece = result;
    piece[axis] = {entry};
    for (int64_t k = 0; k < pieces; ++k)
      r.operands.push_back(piece);
  } else {
    r.factors[result[axis][0]].kind = Kind::Whole;
    for (Value v : getInputs()) {
      Dims piece = result;
      piece[axis] = {r.addFactor(shape(v)[axis], Kind::Whole)};
      r.operands.push_back(piece);
    }
  }
  r.results.push_back(result);
  r.setLinear(Linearity::Joint, linear);
  return r;
}

/// Slice and pad: the axis differs in size between operand and result, so it
/// stays whole; the other dimensions are shared.
static ShardingRule alongAxis(Value input, Value output, int64_t axis) {
  ShardingRule r;
  Dims operand = r.addFactors(shape(input));
  Dims result = operand;
  r.factors[operand[axis][0]].kind = Kind::Whole;
  result[axis] = {r.addFactor(shape(output)[axis], Kind::Whole)};
  r.operands.push_back(operand);
  r.results.push_back(result);
  r.setLinear(Linearity::Joint, {true});
  return r;
}

ShardingRule SliceOp::getShardingRule() {
  return alongAxis(getInput(), getResult(), getAxis());
}

ShardingRule PadOp::getShardingRule() {
  return alongAxis(getInput(), getResult(), getAxis());
}

//===----------------------------------------------------------------------===//
// Reductions and linear algebra
//===----------------------------------------------------------------------===//

ShardingRule ReduceSumOp::getShardingRule() {
  ShardingRule r;
  Dims operand = r.addFactors(shape(getInput()));
  Dims result;
  for (auto [d, dim] : llvm::enumerate(operand))
    if (!llvm::is_contained(getAxes(), static_cast<int64_t>(d)))
      result.push_back(dim);
  r.operands.push_back(operand);
  r.results.push_back(result);
  r.setLinear(Linearity::Joint, {true});
  return r;
}

ShardingRule MatmulOp::getShardingRule() {
  // m, n and k may be padded (the logits of an uneven vocabulary-parallel
  // table): padded rows or columns of an operand make padded rows or columns
  // of the result, and a contraction over padding adds zeros when either
  // operand's padding is zero, which dt-spmd-partition proves.
  ShardingRule r;
  ArrayRef<int64_t> a = shape(getLhs()), c = shape(getResult());
  size_t rank = c.size();
  Dims batch = r.addFactors(c.drop_back(2));
  int64_t m = r.addFactor(c[rank - 2], Kind::Free, /*uneven=*/true);
  int64_t n = r.addFactor(c[rank - 1], Kind::Free, /*uneven=*/true);
  int64_t k = r.addFactor(getTransposeLhs() ? a[rank - 2] : a[rank - 1],
                          Kind::Free, /*uneven=*/true);
  r.operands.push_back(getTransposeLhs() ? withLeading(batch, {k, m})
                                         : withLeading(batch, {m, k}));
  r.operands.push_back(getTransposeRhs() ? withLeading(batch, {n, k})
                                         : withLeading(batch, {k, n}));
  r.results.push_back(withLeading(batch, {m, n}));
  r.setLinear(Linearity::Separate, {true, true});
  return r;
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

ShardingRule SoftmaxOp::getShardingRule() {
  ShardingRule r = elementwise(*this, Linearity::None, {});
  r.factors[r.results[0][getAxis()][0]].kind = Kind::Whole;
  return r;
}

/// A normalisation over the last dimension of `x` (layer and RMS norms, and
/// their gradients): each operand and result is `x`-shaped ('x', free leading
/// factors, the last dimension whole) or a vector of that dimension ('c').
static ShardingRule normRule(Value x, StringRef operands,
                             StringRef results) {
  ShardingRule r;
  ArrayRef<int64_t> xs = shape(x);
  Dims leading = r.addFactors(xs.drop_back());
  int64_t c = r.addFactor(xs.back(), Kind::Whole);
  Dims full = withLeading(leading, {c});
  for (char k : operands)
    r.operands.push_back(k == 'x' ? full : Dims{{c}});
  for (char k : results)
    r.results.push_back(k == 'x' ? full : Dims{{c}});
  return r;
}

ShardingRule LayerNormOp::getShardingRule() {
  return normRule(getInput(), "xcc", "x");
}

ShardingRule LayerNormGradOp::getShardingRule() {
  // The weight and bias gradients sum over the leading dimensions.
  ShardingRule r = normRule(getInput(), "xcx", "xcc");
  r.setLinear(Linearity::Separate, {false, false, true});
  return r;
}

ShardingRule RMSNormOp::getShardingRule() {
  return normRule(getInput(), "xc", "x");
}

ShardingRule RMSNormGradOp::getShardingRule() {
  // The weight gradient sums over the leading dimensions.
  ShardingRule r = normRule(getInput(), "xcx", "xc");
  r.setLinear(Linearity::Separate, {false, false, true});
  return r;
}

ShardingRule RopeOp::getShardingRule() {
  // Linear in its input; positions (dimension -2) and the rotated pairs
  // (dimension -1) stay whole.
  ShardingRule r = elementwise(*this, Linearity::Joint, {true});
  int64_t rank = getType().getRank();
  for (int64_t d : {rank - 2, rank - 1})
    for (int64_t f : r.results[0][d]) // none for a size-1 dimension
      r.factors[f].kind = Kind::Whole;
  return r;
}

/// The factors of a convolution: the batch and (with one group) the output
/// and input channels may split; the windows' dimensions stay whole (a split
/// image would need its neighbours' rows). With groups, channels stay whole.
struct ConvFactors {
  int64_t n, o, c, h, w, kh, kw, oh, ow;
};

static ConvFactors convFactors(ShardingRule &r, const Conv2dShape &s) {
  Kind channels = s.groups == 1 ? Kind::Free : Kind::Whole;
  ConvFactors f;
  f.n = r.addFactor(s.n);
  f.o = r.addFactor(s.o, channels);
  f.c = r.addFactor(s.groups == 1 ? s.c : s.c / s.groups, channels);
  f.h = r.addFactor(s.h, Kind::Whole);
  f.w = r.addFactor(s.w, Kind::Whole);
  f.kh = r.addFactor(s.kh, Kind::Whole);
  f.kw = r.addFactor(s.kw, Kind::Whole);
  f.oh = r.addFactor(s.oh, Kind::Whole);
  f.ow = r.addFactor(s.ow, Kind::Whole);
  return f;
}

/// With groups the input's channels are groups x (c / groups): a whole
/// factor of its own, so that nothing splits them.
static ShardingRule::Dim inputChannels(ShardingRule &r, const ConvFactors &f,
                                       const Conv2dShape &s) {
  if (s.groups == 1)
    return {f.c};
  return {r.addFactor(s.c, Kind::Whole)};
}

ShardingRule Conv2dOp::getShardingRule() {
  // Linear in each operand; the input channels are summed over.
  ShardingRule r;
  Conv2dShape s = getConv2dShape();
  ConvFactors f = convFactors(r, s);
  r.operands = {{{f.n}, inputChannels(r, f, s), {f.h}, {f.w}},
                {{f.o}, {f.c}, {f.kh}, {f.kw}}};
  r.results.push_back({{f.n}, {f.o}, {f.oh}, {f.ow}});
  r.setLinear(Linearity::Separate, {true, true});
  return r;
}

ShardingRule Conv2dInputGradOp::getShardingRule() {
  // Sums over the output channels.
  ShardingRule r;
  Conv2dShape s = getConv2dShape();
  ConvFactors f = convFactors(r, s);
  r.operands = {{{f.n}, {f.o}, {f.oh}, {f.ow}},
                {{f.o}, {f.c}, {f.kh}, {f.kw}}};
  r.results.push_back({{f.n}, inputChannels(r, f, s), {f.h}, {f.w}});
  r.setLinear(Linearity::Separate, {true, true});
  return r;
}

ShardingRule Conv2dWeightGradOp::getShardingRule() {
  // Sums over the batch: split samples leave partial weight gradients.
  ShardingRule r;
  Conv2dShape s = getConv2dShape();
  ConvFactors f = convFactors(r, s);
  r.operands = {{{f.n}, inputChannels(r, f, s), {f.h}, {f.w}},
                {{f.n}, {f.o}, {f.oh}, {f.ow}}};
  r.results.push_back({{f.o}, {f.c}, {f.kh}, {f.kw}});
  r.setLinear(Linearity::Separate, {true, true});
  return r;
}

/// A pooling: samples and channels may split, the images stay whole.
/// `operands` lists, per operand, whether it is the input (else the
/// result's adjoint); `linear` which operands a partial sum may pass.
static ShardingRule poolRule(const Conv2dShape &s, ArrayRef<bool> operands,
                             bool resultIsInput, Linearity linearity,
                             ArrayRef<bool> linear) {
  ShardingRule r;
  int64_t n = r.addFactor(s.n), c = r.addFactor(s.c);
  int64_t h = r.addFactor(s.h, Kind::Whole), w = r.addFactor(s.w, Kind::Whole),
          oh = r.addFactor(s.oh, Kind::Whole),
          ow = r.addFactor(s.ow, Kind::Whole);
  Dims input{{n}, {c}, {h}, {w}}, output{{n}, {c}, {oh}, {ow}};
  for (bool isInput : operands)
    r.operands.push_back(isInput ? input : output);
  r.results.push_back(resultIsInput ? input : output);
  r.setLinear(linearity, linear);
  return r;
}

ShardingRule MaxPool2dOp::getShardingRule() {
  return poolRule(getPool2dShape(), {true}, false, Linearity::None, {});
}
ShardingRule MaxPool2dGradOp::getShardingRule() {
  // Linear in the adjoint; the input only says where it goes.
  return poolRule(getPool2dShape(), {true, false}, true, Linearity::Separate,
                  {false, true});
}
ShardingRule AvgPool2dOp::getShardingRule() {
  return poolRule(getPool2dShape(), {true}, false, Linearity::Joint, {true});
}
ShardingRule AvgPool2dGradOp::getShardingRule() {
  return poolRule(getPool2dShape(), {false}, true, Linearity::Joint, {true});
}

ShardingRule DropoutOp::getShardingRule() {
  // Elementwise and linear in its input (the mask is the same on every
  // rank); dt-spmd-partition says where a rank's block starts. The step,
  // micro-batch index and offsets are scalars.
  ShardingRule r;
  Dims dims = r.addFactors(shape(getResult()));
  r.operands.push_back(dims);
  for (unsigned i = 1; i < getNumOperands(); ++i)
    r.operands.push_back({});
  r.results.push_back(dims);
  SmallVector<bool> linear(getNumOperands(), false);
  linear[0] = true;
  r.setLinear(Linearity::Joint, linear);
  return r;
}

ShardingRule EmbeddingOp::getShardingRule() {
  // A lookup is a product with one-hot rows: split rows (a vocabulary-parallel
  // table) leave each rank a partial sum of the result, which
  // dt-spmd-partition computes with dt.embedding_shard.
  ShardingRule r;
  ArrayRef<int64_t> table = shape(getTable());
  int64_t rows = r.addFactor(table[0], Kind::Free, /*uneven=*/true);
  int64_t width = r.addFactor(table[1]);
  Dims ids = r.addFactors(shape(getIds()));
  r.operands = {{{rows}, {width}}, ids};
  r.results.push_back(withLeading(ids, {width}));
  r.setLinear(Linearity::Separate, {true, false});
  return r;
}

ShardingRule EmbeddingGradOp::getShardingRule() {
  // A scatter-add over the positions: splitting them leaves partial tables.
  // Split rows are the rows of a vocabulary-parallel table's gradient
  // (dt.embedding_grad_shard).
  ShardingRule r;
  ArrayRef<int64_t> table = shape(getTableGrad());
  Dims ids = r.addFactors(shape(getIds()));
  int64_t rows = r.addFactor(table[0], Kind::Free, /*uneven=*/true);
  int64_t width = r.addFactor(table[1]);
  r.operands = {ids, withLeading(ids, {width})};
  r.results.push_back({{rows}, {width}});
  r.setLinear(Linearity::Separate, {false, true});
  return r;
}

/// cross_entropy, its gradient and count_correct: logits [..., C] and labels
/// [...]; the positions are `positions`-kind factors, the classes combined
/// across ranks (vocabulary parallelism).
static ShardingRule logitsRule(Value logits, Kind positions, Dims &leading,
                               int64_t &classes) {
  ShardingRule r;
  ArrayRef<int64_t> l = shape(logits);
  leading = r.addFactors(l.drop_back(), positions);
  // The kernels over blocks of classes mask the padding of an uneven split.
  classes = r.addFactor(l.back(), Kind::Combined, /*uneven=*/true);
  r.operands = {withLeading(leading, {classes}), leading};
  return r;
}

ShardingRule CrossEntropyOp::getShardingRule() {
  Dims leading;
  int64_t classes;
  ShardingRule r = logitsRule(getLogits(), Kind::Mean, leading, classes);
  r.results.push_back({});
  return r;
}

ShardingRule CrossEntropyGradOp::getShardingRule() {
  Dims leading;
  int64_t classes;
  ShardingRule r = logitsRule(getLogits(), Kind::Mean, leading, classes);
  r.operands.push_back({});
  r.results.push_back(withLeading(leading, {classes}));
  r.setLinear(Linearity::Separate, {false, false, true});
  return r;
}

ShardingRule CountCorrectOp::getShardingRule() {
  // A count is a sum over the positions.
  Dims leading;
  int64_t classes;
  ShardingRule r = logitsRule(getLogits(), Kind::Free, leading, classes);
  r.results.push_back({});
  return r;
}

/// attention and its gradient: [..., H, T, D]; the heads and everything before
/// them are independent, T and D are whole.
static Dims attentionDims(ShardingRule &r, Value q) {
  ArrayRef<int64_t> s = shape(q);
  size_t rank = s.size();
  Dims dims = r.addFactors(s.drop_back(2));
  dims.push_back({r.addFactor(s[rank - 2], Kind::Whole)});
  dims.push_back({r.addFactor(s[rank - 1], Kind::Whole)});
  return dims;
}

ShardingRule AttentionOp::getShardingRule() {
  ShardingRule r;
  Dims dims = attentionDims(r, getQuery());
  // The log-sum-exp's rows go with the queries' (it has no head dimension).
  Dims rows(dims.begin(), dims.end() - 1);
  r.operands = {dims, dims, dims};
  r.results = {dims, rows};
  return r;
}

ShardingRule AttentionGradOp::getShardingRule() {
  ShardingRule r;
  Dims dims = attentionDims(r, getQuery());
  Dims rows(dims.begin(), dims.end() - 1);
  r.operands = {dims, dims, dims, dims, rows, dims};
  r.results = {dims, dims, dims};
  r.setLinear(Linearity::Separate, {false, false, false, false, false, true});
  return r;
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

ShardingRule ScheduleOp::getShardingRule() {
  ShardingRule r;
  r.operands = {{}, {}};
  r.results = {{}};
  return r;
}
