//===- DTOps.cpp - dt dialect: registration, verifiers, folders -----------===//
//
// The dialect's registration and the structural rules of its ops: every
// verifier states the shape relation between operands and results that later
// passes rely on (the lowering never re-checks a shape). VJPs live in
// DTVJP.cpp, scalar bodies of elementwise ops in DTScalar.cpp.
//
//===----------------------------------------------------------------------===//

#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Dialect/DT/IR/Sharding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace dt;

#include "dt/Dialect/DT/IR/DTInterfaces.cpp.inc"
#include "dt/Dialect/DT/IR/DTOpsDialect.cpp.inc"
#include "dt/Dialect/DT/IR/DTOpsEnums.cpp.inc"

void DTDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dt/Dialect/DT/IR/DTOps.cpp.inc"
      >();
  registerAttributes();
}

Operation *DTDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

SmallVector<ReductionRun, 4> dt::reductionRuns(ArrayRef<int64_t> shape,
                                               ArrayRef<int64_t> axes) {
  SmallVector<ReductionRun, 4> runs;
  for (auto [d, size] : llvm::enumerate(shape)) {
    bool reduced = llvm::is_contained(axes, static_cast<int64_t>(d));
    if (!runs.empty() && (runs.back().reduced == reduced || size == 1))
      runs.back().size *= size;
    else
      runs.push_back({reduced, size});
  }
  if (runs.size() > 1 && runs.front().size == 1)
    runs.erase(runs.begin());
  return runs;
}

bool dt::isBroadcastable(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (from.size() > to.size())
    return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i])
      return false;
  return true;
}

Value dt::createSplat(OpBuilder &b, Location loc, RankedTensorType type,
                      double value) {
  Type elem = type.getElementType();
  Attribute scalar;
  if (auto f = llvm::dyn_cast<FloatType>(elem))
    scalar = b.getFloatAttr(f, value);
  else
    scalar = b.getIntegerAttr(elem, static_cast<int64_t>(value));
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, scalar));
}

GlobalOp dt::lookupGlobal(Operation *from, StringRef name) {
  return SymbolTable::lookupNearestSymbolFrom<GlobalOp>(
      from, StringAttr::get(from->getContext(), name));
}

Type dt::pureConversionTo(Operation *op) {
  auto fused = llvm::dyn_cast_or_null<FusedOp>(op);
  if (!fused || fused.isReduction() || fused->getNumOperands() != 1 ||
      fused->getNumResults() != 1 ||
      llvm::cast<RankedTensorType>(fused->getOperand(0).getType()).getShape() !=
          llvm::cast<RankedTensorType>(fused->getResult(0).getType())
              .getShape())
    return {};
  Block &body = fused.getBody().front();
  if (!llvm::hasNItems(body, 2))
    return {};
  auto convert = llvm::dyn_cast<ConvertOp>(body.front());
  Operation *yield = body.getTerminator();
  if (!convert || convert.getInput() != body.getArgument(0) ||
      yield->getNumOperands() != 1 ||
      yield->getOperand(0) != convert.getResult())
    return {};
  return llvm::cast<RankedTensorType>(convert.getType()).getElementType();
}

static int64_t numElements(Type t) {
  return llvm::cast<RankedTensorType>(t).getNumElements();
}

static RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

/// Checks that `axis` names a dimension of a rank-`rank` tensor.
static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ")
           << axis << " is out of range for rank " << rank;
  return success();
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

LogicalResult GlobalOp::verify() {
  if (getInit() && getRole() != Role::param)
    return emitOpError("only parameters have an initialiser");
  if (getRole() == Role::param && !getInit())
    return emitOpError("a parameter needs an initialiser");
  if (auto init = getInit()) {
    auto kind = init->getAs<StringAttr>("kind");
    if (!kind)
      return emitOpError("initialiser needs a string 'kind'");
    auto need = [&](ArrayRef<StringRef> keys) -> LogicalResult {
      for (StringRef key : keys)
        if (!init->getAs<FloatAttr>(key))
          return emitOpError("'")
                 << kind.getValue() << "' initialiser needs a float '" << key
                 << "'";
      return success();
    };
    if (kind == "uniform")
      return need({"low", "high"});
    if (kind == "normal")
      return need({"mean", "std"});
    if (kind == "constant")
      return need({"value"});
    return emitOpError("unknown initialiser kind '") << kind.getValue() << "'";
  }
  if (auto offset = getOffset(); offset && *offset % 64 != 0)
    return emitOpError("offset ") << *offset << " is not 64-byte aligned";
  return success();
}

/// Shared by load and store: the symbol names a global of exactly `type`.
static LogicalResult verifyGlobalUse(Operation *op,
                                     SymbolTableCollection &symbols,
                                     FlatSymbolRefAttr ref, Type type) {
  auto global = symbols.lookupNearestSymbolFrom<GlobalOp>(op, ref.getAttr());
  if (!global)
    return op->emitOpError("'")
           << ref.getValue() << "' does not name a dt.global";
  if (global.getType() != type)
    return op->emitOpError("type ")
           << type << " does not match the global's type " << global.getType();
  return success();
}

LogicalResult LoadOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyGlobalUse(*this, symbols, getGlobalAttr(), getType());
}

LogicalResult StoreOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyGlobalUse(*this, symbols, getGlobalAttr(), getValue().getType());
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ConstantOp::verify() {
  if (!llvm::isa<DenseElementsAttr>(getValue()))
    return emitOpError("value must be a dense elements attribute");
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

LogicalResult BroadcastToOp::verify() {
  if (getInput().getType().getElementType() != getType().getElementType())
    return emitOpError("element types differ");
  if (!isBroadcastable(shapeOf(getInput()), shapeOf(getResult())))
    return emitOpError("operand shape does not broadcast to the result shape");
  return success();
}

OpFoldResult BroadcastToOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // A splat constant broadcasts to a splat constant.
  if (auto splat =
          llvm::dyn_cast_or_null<SplatElementsAttr>(adaptor.getInput()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

LogicalResult ReshapeOp::verify() {
  if (getInput().getType().getElementType() != getType().getElementType())
    return emitOpError("element types differ");
  if (numElements(getInput().getType()) != numElements(getType()))
    return emitOpError("operand has ")
           << numElements(getInput().getType()) << " elements but the result "
           << numElements(getType());
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) => reshape(x)
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  if (auto splat =
          llvm::dyn_cast_or_null<SplatElementsAttr>(adaptor.getInput()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

LogicalResult TransposeOp::verify() {
  ArrayRef<int64_t> perm = getPerm();
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  if (perm.size() != in.size() || out.size() != in.size())
    return emitOpError("permutation, operand and result must have one rank");
  SmallVector<bool> seen(perm.size(), false);
  for (auto [i, p] : llvm::enumerate(perm)) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p])
      return emitOpError("'perm' is not a permutation");
    seen[p] = true;
    if (out[i] != in[p])
      return emitOpError("result dimension ")
             << i << " must be operand dimension " << p;
  }
  if (getInput().getType().getElementType() != getType().getElementType())
    return emitOpError("element types differ");
  return success();
}

LogicalResult SplitOp::verify() {
  RankedTensorType in = getInput().getType();
  int64_t axis = getAxis();
  if (failed(verifyAxis(*this, axis, in.getRank())))
    return failure();
  if (getResults().empty())
    return emitOpError("needs at least one result");
  int64_t total = 0;
  for (Value r : getResults()) {
    RankedTensorType t = tensorType(r);
    if (t.getRank() != in.getRank() ||
        t.getElementType() != in.getElementType())
      return emitOpError(
          "results must have the operand's rank and element type");
    for (int64_t d = 0; d < in.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != in.getDimSize(d))
        return emitOpError(
            "results may differ from the operand only along the axis");
    total += t.getDimSize(axis);
  }
  if (total != in.getDimSize(axis))
    return emitOpError("pieces add up to ") << total << " along axis " << axis
                                            << ", not " << in.getDimSize(axis);
  return success();
}

LogicalResult ConcatOp::verify() {
  RankedTensorType out = getType();
  int64_t axis = getAxis();
  if (failed(verifyAxis(*this, axis, out.getRank())))
    return failure();
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  int64_t total = 0;
  for (Value v : getInputs()) {
    RankedTensorType t = tensorType(v);
    if (t.getRank() != out.getRank() ||
        t.getElementType() != out.getElementType())
      return emitOpError(
          "operands must have the result's rank and element type");
    for (int64_t d = 0; d < out.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != out.getDimSize(d))
        return emitOpError(
            "operands may differ from the result only along the axis");
    total += t.getDimSize(axis);
  }
  if (total != out.getDimSize(axis))
    return emitOpError("operands add up to ")
           << total << " along axis " << axis << ", not "
           << out.getDimSize(axis);
  return success();
}

/// Shared by slice and pad: same rank and element type, equal sizes off the
/// axis, and `shorter` no longer than `longer` along it.
static LogicalResult verifyAlongAxis(Operation *op, int64_t axis,
                                     RankedTensorType shorter,
                                     RankedTensorType longer) {
  if (failed(verifyAxis(op, axis, longer.getRank())))
    return failure();
  if (shorter.getRank() != longer.getRank() ||
      shorter.getElementType() != longer.getElementType())
    return op->emitOpError("operand and result differ in rank or element type");
  for (int64_t d = 0; d < longer.getRank(); ++d)
    if (d != axis && shorter.getDimSize(d) != longer.getDimSize(d))
      return op->emitOpError(
          "operand and result may differ only along the axis");
  if (shorter.getDimSize(axis) > longer.getDimSize(axis))
    return op->emitOpError("the range does not fit along axis ") << axis;
  return success();
}

LogicalResult SliceOp::verify() {
  if (failed(verifyAlongAxis(*this, getAxis(), getType(),
                             tensorType(getInput()))))
    return failure();
  if (int64_t(getStart()) < 0 ||
      int64_t(getStart()) + getType().getDimSize(getAxis()) >
                            tensorType(getInput()).getDimSize(getAxis()))
    return emitOpError("the range starting at ")
           << getStart() << " does not fit along axis " << getAxis();
  return success();
}

LogicalResult PadOp::verify() {
  return verifyAlongAxis(*this, getAxis(), tensorType(getInput()), getType());
}

//===----------------------------------------------------------------------===//
// Reductions and linear algebra
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  SmallVector<bool> reduced(in.size(), false);
  int64_t prev = -1;
  for (int64_t a : getAxes()) {
    if (failed(verifyAxis(*this, a, in.size())))
      return failure();
    if (a <= prev)
      return emitOpError("axes must be strictly increasing");
    prev = a;
    reduced[a] = true;
  }
  SmallVector<int64_t> expected;
  for (auto [i, d] : llvm::enumerate(in))
    if (!reduced[i])
      expected.push_back(d);
  if (ArrayRef<int64_t>(expected) != shapeOf(getResult()))
    return emitOpError(
        "result shape must be the operand's without the reduced axes");
  if (getInput().getType().getElementType() != getType().getElementType())
    return emitOpError("element types differ");
  return success();
}

/// The shapes of C = op(A) op(B), shared by dt.matmul and dt.matmul_bias.
static LogicalResult verifyProduct(Operation *op, Value lhs, Value rhs,
                                   Value result, bool transposeLhs,
                                   bool transposeRhs) {
  ArrayRef<int64_t> a = shapeOf(lhs), b = shapeOf(rhs), c = shapeOf(result);
  if (a.size() < 2 || a.size() != b.size() || c.size() != a.size())
    return op->emitOpError("operands and result must have one rank, at least 2");
  size_t r = a.size();
  if (a.drop_back(2) != b.drop_back(2) || a.drop_back(2) != c.drop_back(2))
    return op->emitOpError("batch dimensions differ");
  int64_t m = transposeLhs ? a[r - 1] : a[r - 2];
  int64_t k = transposeLhs ? a[r - 2] : a[r - 1];
  int64_t kb = transposeRhs ? b[r - 1] : b[r - 2];
  int64_t n = transposeRhs ? b[r - 2] : b[r - 1];
  if (k != kb)
    return op->emitOpError("contracting dimensions differ: ")
           << k << " vs " << kb;
  if (c[r - 2] != m || c[r - 1] != n)
    return op->emitOpError("result must be ") << m << "x" << n;
  Type e = tensorType(lhs).getElementType();
  if (tensorType(rhs).getElementType() != e ||
      tensorType(result).getElementType() != e)
    return op->emitOpError("element types differ");
  return success();
}

LogicalResult MatmulOp::verify() {
  return verifyProduct(*this, getLhs(), getRhs(), getResult(),
                       getTransposeLhs(), getTransposeRhs());
}

LogicalResult MatmulBiasOp::verify() {
  if (failed(verifyProduct(*this, getLhs(), getRhs(), getResult(),
                           getTransposeLhs(), getTransposeRhs())))
    return failure();
  ArrayRef<int64_t> c = shapeOf(getResult());
  if (shapeOf(getBias()) != c.take_back(1))
    return emitOpError("bias must be a vector of the result's last dimension, ")
           << c.back();
  if (tensorType(getBias()).getElementType() != getType().getElementType())
    return emitOpError("element types differ");
  return success();
}

namespace {
/// Pattern: matmul(transpose(a, swap last two), b) => matmul(a, b)
/// {transpose_lhs toggled} (and likewise for the rhs): BLAS reads either
/// layout, so the copy is never needed. This is how `x @ transpose(weight)` in
/// nn.Linear becomes one GEMM.
struct FoldTransposeIntoMatmul : public OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  static Value swappedInput(Value v) {
    auto t = v.getDefiningOp<TransposeOp>();
    if (!t)
      return {};
    ArrayRef<int64_t> perm = t.getPerm();
    int64_t r = perm.size();
    for (int64_t i = 0; i < r - 2; ++i)
      if (perm[i] != i)
        return {};
    return perm[r - 2] == r - 1 && perm[r - 1] == r - 2 ? t.getInput()
                                                        : Value();
  }

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    Value lhs = swappedInput(op.getLhs()), rhs = swappedInput(op.getRhs());
    if (!lhs && !rhs)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      if (lhs) {
        op.getLhsMutable().assign(lhs);
        op.setTransposeLhs(!op.getTransposeLhs());
      }
      if (rhs) {
        op.getRhsMutable().assign(rhs);
        op.setTransposeRhs(!op.getTransposeRhs());
      }
    });
    return success();
  }
};
} // namespace

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *ctx) {
  patterns.add<FoldTransposeIntoMatmul>(ctx);
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getType().getRank());
}

/// weight (and bias) are vectors of the last dimension of x.
static LogicalResult verifyNormParams(Operation *op, Value x,
                                      ArrayRef<Value> vectors) {
  ArrayRef<int64_t> xs = shapeOf(x);
  if (xs.empty())
    return op->emitOpError("input must have at least one dimension");
  for (Value v : vectors)
    if (shapeOf(v) != xs.take_back())
      return op->emitOpError(vectors.size() == 1 ? "weight must have shape ["
                                                 : "weight and bias must have "
                                                   "shape [")
             << xs.back() << "]";
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (getInput().getType() != getType())
    return emitOpError("result must have the input's type");
  return verifyNormParams(*this, getInput(), {getWeight(), getBias()});
}

LogicalResult LayerNormGradOp::verify() {
  if (getInput().getType() != getResultGrad().getType() ||
      getInputGrad().getType() != getInput().getType())
    return emitOpError("input, result_grad and input_grad must have one type");
  if (getWeightGrad().getType() != getWeight().getType() ||
      getBiasGrad().getType() != getWeight().getType())
    return emitOpError("weight_grad and bias_grad must have the weight's type");
  return verifyNormParams(*this, getInput(), {getWeight()});
}

LogicalResult RMSNormOp::verify() {
  if (getInput().getType() != getType())
    return emitOpError("result must have the input's type");
  return verifyNormParams(*this, getInput(), {getWeight()});
}

LogicalResult RMSNormGradOp::verify() {
  if (getInput().getType() != getResultGrad().getType() ||
      getInputGrad().getType() != getInput().getType())
    return emitOpError("input, result_grad and input_grad must have one type");
  if (getWeightGrad().getType() != getWeight().getType())
    return emitOpError("weight_grad must have the weight's type");
  return verifyNormParams(*this, getInput(), {getWeight()});
}

LogicalResult RopeOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput());
  if (x.size() < 2 || x.back() % 2 != 0)
    return emitOpError("input must be [..., T, D] with D even");
  if (!(getTheta().convertToDouble() > 0))
    return emitOpError("theta must be positive");
  if (std::optional<ArrayRef<double>> s = getScaling()) {
    if (s->size() != 4)
      return emitOpError("scaling must be [factor, low_freq_factor, "
                         "high_freq_factor, original]");
    double factor = (*s)[0], low = (*s)[1], high = (*s)[2],
           original = (*s)[3];
    if (!(factor > 0) || !(original >= 0))
      return emitOpError("scaling needs a positive factor and a "
                         "non-negative original length");
    if (original > 0 && !(low > 0 && high > low))
      return emitOpError("scaling needs 0 < low_freq_factor < "
                         "high_freq_factor");
  }
  return success();
}

int64_t Conv2dShape::outputSize(int dim) const {
  int64_t in = dim == 0 ? h : w, k = dim == 0 ? kh : kw;
  int64_t span = in + 2 * padding[dim] - dilation[dim] * (k - 1) - 1;
  return span < 0 ? 0 : span / stride[dim] + 1;
}

/// The convolution of `input`, `weight` and `result` (whichever of them the
/// op computes) with the op's attributes.
template <typename Op>
static Conv2dShape conv2dShape(Op op, Value input, Value weight,
                               Value result) {
  ArrayRef<int64_t> x = shapeOf(input), w = shapeOf(weight),
                    y = shapeOf(result);
  Conv2dShape s{};
  if (x.size() == 4 && w.size() == 4 && y.size() == 4) {
    s.n = x[0], s.c = x[1], s.h = x[2], s.w = x[3];
    s.o = w[0], s.kh = w[2], s.kw = w[3];
    s.oh = y[2], s.ow = y[3];
  }
  for (int d = 0; d < 2; ++d) {
    auto at = [&](ArrayRef<int64_t> a) { return a.size() == 2 ? a[d] : 0; };
    s.stride[d] = at(op.getStride());
    s.padding[d] = at(op.getPadding());
    s.dilation[d] = at(op.getDilation());
  }
  s.groups = op.getGroups();
  return s;
}

Conv2dShape Conv2dOp::getConv2dShape() {
  return conv2dShape(*this, getInput(), getWeight(), getResult());
}
Conv2dShape Conv2dInputGradOp::getConv2dShape() {
  return conv2dShape(*this, getInputGrad(), getWeight(), getResultGrad());
}
Conv2dShape Conv2dWeightGradOp::getConv2dShape() {
  return conv2dShape(*this, getInput(), getWeightGrad(), getResultGrad());
}

/// The checks dt.conv2d and its gradients share: NCHW ranks, the attributes,
/// channels that the groups divide, and the output size the window gives.
template <typename Op>
static LogicalResult verifyConv2d(Op op, Value input, Value weight,
                                  Value result) {
  for (auto [v, what] : {std::pair{input, "input"}, {weight, "weight"},
                         {result, "result"}})
    if (shapeOf(v).size() != 4)
      return op.emitOpError(what) << " must have rank 4";
  for (auto [a, what, least] :
       {std::tuple{op.getStride(), "stride", 1}, {op.getPadding(), "padding", 0},
        {op.getDilation(), "dilation", 1}})
    if (a.size() != 2 || a[0] < least || a[1] < least)
      return op.emitOpError(what) << " must be two values of at least " << least;
  Conv2dShape s = op.getConv2dShape();
  ArrayRef<int64_t> w = shapeOf(weight), y = shapeOf(result);
  if (s.groups < 1 || s.c % s.groups != 0 || s.o % s.groups != 0)
    return op.emitOpError("groups (")
           << s.groups << ") must divide the input's " << s.c
           << " and the output's " << s.o << " channels";
  if (w[1] != s.c / s.groups)
    return op.emitOpError("weight must have ")
           << s.c / s.groups << " input channels per group, not " << w[1];
  int64_t oh = s.outputSize(0), ow = s.outputSize(1);
  if (oh < 1 || ow < 1)
    return op.emitOpError("window of ")
           << s.kh << "x" << s.kw << " does not fit the padded " << s.h << "x"
           << s.w << " input";
  if (y[0] != s.n || y[1] != s.o || y[2] != oh || y[3] != ow)
    return op.emitOpError("result must be [")
           << s.n << ", " << s.o << ", " << oh << ", " << ow << "]";
  return success();
}

LogicalResult Conv2dOp::verify() {
  return verifyConv2d(*this, getInput(), getWeight(), getResult());
}
LogicalResult Conv2dInputGradOp::verify() {
  return verifyConv2d(*this, getInputGrad(), getWeight(), getResultGrad());
}
LogicalResult Conv2dWeightGradOp::verify() {
  return verifyConv2d(*this, getInput(), getWeightGrad(), getResultGrad());
}

/// A pooling's window over `input` producing `result`, as a convolution of
/// one channel per group.
template <typename Op>
static Conv2dShape pool2dShape(Op op, Value input, Value result) {
  ArrayRef<int64_t> x = shapeOf(input), y = shapeOf(result);
  Conv2dShape s{};
  if (x.size() == 4 && y.size() == 4) {
    s.n = x[0], s.c = x[1], s.h = x[2], s.w = x[3];
    s.o = x[1], s.oh = y[2], s.ow = y[3];
  }
  auto at = [](ArrayRef<int64_t> a, int d) { return a.size() == 2 ? a[d] : 0; };
  s.kh = at(op.getKernel(), 0), s.kw = at(op.getKernel(), 1);
  for (int d = 0; d < 2; ++d) {
    s.stride[d] = at(op.getStride(), d);
    s.padding[d] = at(op.getPadding(), d);
    s.dilation[d] = 1;
  }
  s.groups = s.c > 0 ? s.c : 1;
  return s;
}

Conv2dShape MaxPool2dOp::getPool2dShape() {
  return pool2dShape(*this, getInput(), getResult());
}
Conv2dShape MaxPool2dGradOp::getPool2dShape() {
  return pool2dShape(*this, getInput(), getResultGrad());
}
Conv2dShape AvgPool2dOp::getPool2dShape() {
  return pool2dShape(*this, getInput(), getResult());
}
Conv2dShape AvgPool2dGradOp::getPool2dShape() {
  return pool2dShape(*this, getInputGrad(), getResultGrad());
}

/// The checks the poolings and their gradients share.
template <typename Op>
static LogicalResult verifyPool2d(Op op, Value input, Value result) {
  if (shapeOf(input).size() != 4 || shapeOf(result).size() != 4)
    return op.emitOpError("input and result must have rank 4");
  for (auto [a, what, least] :
       {std::tuple{op.getKernel(), "kernel", 1}, {op.getStride(), "stride", 1},
        {op.getPadding(), "padding", 0}})
    if (a.size() != 2 || a[0] < least || a[1] < least)
      return op.emitOpError(what) << " must be two values of at least " << least;
  Conv2dShape s = op.getPool2dShape();
  if (2 * s.padding[0] > s.kh || 2 * s.padding[1] > s.kw)
    return op.emitOpError("padding must be at most half the window");
  int64_t oh = s.outputSize(0), ow = s.outputSize(1);
  if (oh < 1 || ow < 1)
    return op.emitOpError("window of ")
           << s.kh << "x" << s.kw << " does not fit the padded " << s.h << "x"
           << s.w << " input";
  ArrayRef<int64_t> y = shapeOf(result);
  if (y[0] != s.n || y[1] != s.c || y[2] != oh || y[3] != ow)
    return op.emitOpError("result must be [")
           << s.n << ", " << s.c << ", " << oh << ", " << ow << "]";
  return success();
}

LogicalResult MaxPool2dOp::verify() {
  return verifyPool2d(*this, getInput(), getResult());
}
LogicalResult MaxPool2dGradOp::verify() {
  if (getInput().getType() != getInputGrad().getType())
    return emitOpError("input and its gradient must have one type");
  return verifyPool2d(*this, getInput(), getResultGrad());
}
LogicalResult AvgPool2dOp::verify() {
  return verifyPool2d(*this, getInput(), getResult());
}
LogicalResult AvgPool2dGradOp::verify() {
  return verifyPool2d(*this, getInputGrad(), getResultGrad());
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p >= 0 && p < 1))
    return emitOpError("p must be in [0, 1), not ") << p;
  if (getSite() < 0 || getSite() > int64_t(UINT32_MAX))
    return emitOpError("site must fit in 32 bits");
  ArrayRef<int64_t> local = shapeOf(getInput()), global = getShape();
  if (local.size() != global.size())
    return emitOpError("shape has rank ")
           << global.size() << ", the input " << local.size();
  if (!getFirsts().empty() && getFirsts().size() != local.size())
    return emitOpError("needs no firsts or one per dimension, not ")
           << getFirsts().size();
  for (auto [l, g] : llvm::zip(local, global))
    if (l > g || l <= 0)
      return emitOpError("input dimension of ")
             << l << " is no block of a dimension of " << g;
  if (getFirsts().empty() && local != global)
    return emitOpError("input is a block of shape but no firsts say where");
  return success();
}

DropoutIndexing DropoutOp::getIndexing() {
  ArrayRef<int64_t> local = shapeOf(getInput()), global = getShape();
  size_t rank = local.size();
  DropoutIndexing d;
  d.strides.assign(rank, 1);
  for (size_t i = rank; i-- > 1;)
    d.strides[i - 1] = d.strides[i] * global[i];
  d.elements = rank ? d.strides[0] * global[0] : 1;
  for (size_t i = rank; i-- > 0;) { // innermost first, then reversed
    if (!d.runs.empty() && local[i + 1] == global[i + 1])
      d.runs.back().first *= local[i];
    else
      d.runs.push_back({local[i], d.strides[i]});
  }
  std::reverse(d.runs.begin(), d.runs.end());
  return d;
}

/// A lookup's table [count, width] (`tableName`), its ids and the rows it
/// reads or writes (`rowsName`, ids + [width]); a block of a table of `total`
/// rows when given.
static LogicalResult verifyLookup(Operation *op, Value table, Value ids,
                                  Value rows, StringRef tableName,
                                  StringRef rowsName,
                                  std::optional<int64_t> total = {}) {
  ArrayRef<int64_t> t = shapeOf(table);
  if (t.size() != 2)
    return op->emitOpError(tableName) << " must be 2-D";
  if (total && *total < t[0])
    return op->emitOpError("holds more rows than the table has");
  SmallVector<int64_t> expected(shapeOf(ids));
  expected.push_back(t[1]);
  if (ArrayRef<int64_t>(expected) != shapeOf(rows))
    return op->emitOpError(rowsName)
           << " must have shape ids + [" << t[1] << "]";
  return success();
}

LogicalResult EmbeddingOp::verify() {
  return verifyLookup(*this, getTable(), getIds(), getResult(), "table",
                      "result");
}

namespace {
/// Pattern: embedding(convert(table), ids) => convert(embedding(table, ids))
/// where the lookup has no more elements than the table: a conversion
/// commutes with picking rows, and converting the rows looked up costs no
/// more than converting the whole table. Mixed precision rounds a tied
/// embedding table to 16 bits for its lookup; GPT-2's 16 x 1024 lookups
/// then round 16 384 rows instead of all 50 257, in the lookup's consumer.
struct ConvertLookedUpRows : public OpRewritePattern<EmbeddingOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(EmbeddingOp op,
                                PatternRewriter &rewriter) const override {
    auto convert = op.getTable().getDefiningOp<ConvertOp>();
    if (!convert)
      return failure();
    auto table = llvm::cast<RankedTensorType>(convert.getInput().getType());
    auto result = llvm::cast<RankedTensorType>(op.getType());
    if (!llvm::isa<FloatType>(table.getElementType()) ||
        result.getNumElements() > table.getNumElements())
      return failure();
    auto rows = rewriter.create<EmbeddingOp>(
        op.getLoc(), result.clone(table.getElementType()), convert.getInput(),
        op.getIds());
    rewriter.replaceOpWithNewOp<ConvertOp>(op, result, rows.getResult());
    return success();
  }
};
} // namespace

void EmbeddingOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *ctx) {
  patterns.add<ConvertLookedUpRows>(ctx);
}

LogicalResult EmbeddingGradOp::verify() {
  return verifyLookup(*this, getTableGrad(), getIds(), getResultGrad(),
                      "table_grad", "result_grad");
}

/// logits [..., C] and labels [...].
static LogicalResult verifyLogitsLabels(Operation *op, Value logits,
                                        Value labels) {
  ArrayRef<int64_t> l = shapeOf(logits), y = shapeOf(labels);
  if (l.empty() || l.drop_back() != y)
    return op->emitOpError(
        "labels must have the logits' shape without the class dimension");
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  return verifyLogitsLabels(*this, getLogits(), getLabels());
}

LogicalResult CrossEntropyGradOp::verify() {
  if (getLogitsGrad().getType() != getLogits().getType())
    return emitOpError("logits_grad must have the logits' type");
  return verifyLogitsLabels(*this, getLogits(), getLabels());
}

LogicalResult CountCorrectOp::verify() {
  return verifyLogitsLabels(*this, getLogits(), getLabels());
}

LogicalResult WaitOp::verify() {
  if (getResult().getType() != getPending().getType())
    return emitOpError("result must have the pending value's type");
  Operation *collective = getPending().getDefiningOp();
  const char *kind = collective ? collectiveKind(collective) : nullptr;
  if (!kind || StringRef(kind) == "shard" ||
      !collective->hasAttr(kAsyncAttr))
    return emitOpError("waits for a value that no asynchronous collective "
                       "(a mesh collective marked dt.async) made");
  if (!getPending().hasOneUse())
    return emitOpError("must be the only user of its collective's result");
  if (getKeep() != collective->getOperands())
    return emitOpError("must keep its collective's operands alive");
  return success();
}

LogicalResult ShardStartOp::verify() {
  if (getAxes().empty())
    return emitOpError("needs at least one mesh axis");
  if (int64_t(getSize()) <= 0)
    return emitOpError("block size must be positive");
  return success();
}

LogicalResult EmbeddingShardOp::verify() {
  return verifyLookup(*this, getTable(), getIds(), getResult(), "table",
                      "result", int64_t(getRows()));
}

LogicalResult EmbeddingGradShardOp::verify() {
  return verifyLookup(*this, getTableGrad(), getIds(), getResultGrad(),
                      "table_grad", "result_grad", int64_t(getRows()));
}

/// Statistics of class blocks: [g, 4, ...labels] (or [4, ...labels] when
/// `gathered` is false).
static LogicalResult verifyStats(Operation *op, Value stats, Value labels,
                                 bool gathered) {
  ArrayRef<int64_t> s = shapeOf(stats);
  size_t lead = gathered ? 2 : 1;
  if (s.size() < lead || s[lead - 1] != 4 ||
      s.drop_front(lead) != shapeOf(labels))
    return op->emitOpError("statistics must have shape ")
           << (gathered ? "[blocks, 4, " : "[4, ") << "...labels]";
  return success();
}

LogicalResult ClassStatsOp::verify() {
  if (int64_t(getClasses()) < shapeOf(getLogits()).back())
    return emitOpError("holds more classes than there are");
  if (failed(verifyLogitsLabels(*this, getLogits(), getLabels())))
    return failure();
  return verifyStats(*this, getResult(), getLabels(), false);
}

LogicalResult CrossEntropyStatsOp::verify() {
  return verifyStats(*this, getStats(), getLabels(), true);
}

LogicalResult CrossEntropyGradShardOp::verify() {
  if (getLogitsGrad().getType() != getLogits().getType())
    return emitOpError("logits_grad must have the logits' type");
  if (int64_t(getClasses()) < shapeOf(getLogits()).back())
    return emitOpError("holds more classes than there are");
  if (failed(verifyLogitsLabels(*this, getLogits(), getLabels())))
    return failure();
  return verifyStats(*this, getStats(), getLabels(), true);
}

LogicalResult CountCorrectStatsOp::verify() {
  return verifyStats(*this, getStats(), getLabels(), true);
}

static LogicalResult verifyAttentionOperands(Operation *op,
                                             ArrayRef<Value> operands) {
  Type t = operands.front().getType();
  for (Value v : operands)
    if (v.getType() != t)
      return op->emitOpError("query, key, value and result must have one type");
  if (shapeOf(operands.front()).size() < 3)
    return op->emitOpError("operands must be [..., heads, T, head_dim]");
  return success();
}

RankedTensorType AttentionOp::lseType(Type result) {
  auto type = llvm::cast<RankedTensorType>(result);
  Builder b(type.getContext());
  Type element = type.getElementType().isF64() ? Type(b.getF64Type())
                                               : Type(b.getF32Type());
  return RankedTensorType::get(type.getShape().drop_back(), element);
}

/// `lse` has the type lseType gives for `result`.
static LogicalResult verifyLse(Operation *op, Value result, Value lse) {
  if (lse.getType() != AttentionOp::lseType(result.getType()))
    return op->emitOpError("the log-sum-exp must be ")
           << AttentionOp::lseType(result.getType())
           << ": the result's shape less its head dimension, in f32 (f64 for "
              "f64)";
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionOperands(
          *this, {getQuery(), getKey(), getValue(), getResult()})))
    return failure();
  return verifyLse(*this, getResult(), getLse());
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionOperands(*this, {getQuery(), getKey(), getValue(),
                                             getResult(), getResultGrad(),
                                             getQueryGrad(), getKeyGrad(),
                                             getValueGrad()})))
    return failure();
  return verifyLse(*this, getResult(), getLse());
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

LogicalResult ScheduleOp::verify() {
  StringRef kind = getKind();
  if (kind != "constant" && kind != "cosine" && kind != "linear" &&
      kind != "step")
    return emitOpError("unknown schedule '") << kind << "'";
  if (getWarmup() < 0)
    return emitOpError("warmup must not be negative");
  if (kind == "step" && getEvery() <= 0)
    return emitOpError("'every' must be positive");
  return success();
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

LogicalResult FusedOp::verify() {
  if (getResults().empty())
    return emitOpError("needs at least one result");
  Block &body = getBody().front();
  auto yield = llvm::dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().size() != getNumResults())
    return emitOpError("must yield one value per result");
  ArrayRef<int64_t> shape = getIterationShape();
  for (Value v : yield.getValues())
    if (shapeOf(v) != shape)
      return emitOpError("all yielded values must have the iteration shape");

  // The results: the yielded values, or their sums over reduce_axes.
  SmallVector<int64_t> resultShape(shape);
  if (auto axes = getReduceAxes()) {
    SmallVector<bool> reduced(shape.size(), false);
    int64_t prev = -1;
    for (int64_t a : *axes) {
      if (a <= prev || a >= static_cast<int64_t>(shape.size()))
        return emitOpError(
            "reduce_axes must be increasing axes of the iteration shape");
      prev = a;
      reduced[a] = true;
    }
    resultShape.clear();
    for (auto [i, d] : llvm::enumerate(shape))
      if (!reduced[i])
        resultShape.push_back(d);
  }
  for (auto [r, v] : llvm::zip(getResults(), yield.getValues()))
    if (shapeOf(r) != ArrayRef<int64_t>(resultShape) ||
        tensorType(r).getElementType() != tensorType(v).getElementType())
      return emitOpError(
          isReduction()
              ? "results must be the yielded values without the reduced axes"
              : "results must have the yielded values' types");

  if (body.getNumArguments() != getInputs().size())
    return emitOpError("needs one block argument per operand");
  for (auto [input, arg] : llvm::zip(getInputs(), body.getArguments())) {
    auto argType = llvm::cast<RankedTensorType>(arg.getType());
    if (argType.getShape() != shape ||
        argType.getElementType() != tensorType(input).getElementType())
      return emitOpError(
          "block arguments must have the iteration shape and the operand's "
          "element type");
    if (!isBroadcastable(shapeOf(input), shape))
      return emitOpError(
          "operand shape does not broadcast to the iteration shape");
  }
  for (Operation &op : body.without_terminator())
    if (!llvm::isa<ScalarizableOpInterface>(op))
      return op.emitOpError(
          "is not elementwise and cannot be part of a dt.fused region");
  return success();
}

#define GET_OP_CLASSES
#include "dt/Dialect/DT/IR/DTOps.cpp.inc"
