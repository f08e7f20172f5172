//===- VJPTest.cpp - every VJP against finite differences, in float64 -----===//
//
// For each differentiable dt op, builds f(x...) = sum_i <op(x...)_i, w_i> for
// random cotangents w_i, asks the op for its VJP with the w_i as result
// adjoints, and compares every element of every operand adjoint with the
// central difference (f(x + h e) - f(x - h e)) / 2h, evaluating everything with
// the reference interpreter in float64. A last test checks that no
// differentiable op is left without a case here.
//
//===----------------------------------------------------------------------===//

#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Interpreter/Interpreter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>

using namespace mlir;
using namespace dt;
using dt::interp::Tensor;

namespace {

/// How a test input is drawn.
enum class Draw { Normal, Positive, Ids, Labels };

struct Arg {
  SmallVector<int64_t> shape;
  Draw draw = Draw::Normal;
  int64_t range =
      0; // ids/labels in [0, range); Labels also uses -1 once (ignored)
};

using BuildFn =
    std::function<SmallVector<Value>(OpBuilder &, Location, ValueRange)>;

/// One finite-difference case: the op's inputs and how to build it from them.
struct Case {
  std::string name;
  std::vector<Arg> args;
  BuildFn build;
  double tol = 1e-6;
};

/// Names the case in gtest's messages instead of dumping its bytes.
void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

class VJPChecker {
public:
  VJPChecker() {
    ctx.loadDialect<DTDialect, func::FuncDialect, arith::ArithDialect,
                    math::MathDialect>();
  }

  /// The name of the op a case builds (without checking anything).
  std::string opName(const Case &c) {
    OpBuilder b(&ctx);
    Location loc = b.getUnknownLoc();
    auto fn = func::FuncOp::create(loc, "probe",
                                   b.getFunctionType(argTypes(b, c.args), {}));
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    std::string name = c.build(b, loc, entry->getArguments())
                           .front()
                           .getDefiningOp()
                           ->getName()
                           .getStringRef()
                           .str();
    fn.erase();
    return name;
  }

  static SmallVector<Type> argTypes(OpBuilder &b,
                                    const std::vector<Arg> &args) {
    SmallVector<Type> types;
    for (const Arg &a : args)
      types.push_back(RankedTensorType::get(
          a.shape, a.draw == Draw::Ids || a.draw == Draw::Labels
                       ? Type(b.getI32Type())
                       : Type(b.getF64Type())));
    return types;
  }

  /// Builds the function, checks its VJP against finite differences.
  void check(const std::vector<Arg> &args, const BuildFn &build, double tol) {
    OpBuilder b(&ctx);
    Location loc = b.getUnknownLoc();
    auto module = ModuleOp::create(loc);
    Type f64 = b.getF64Type();
    auto fn = func::FuncOp::create(loc, "f",
                                   b.getFunctionType(argTypes(b, args), {}));
    module.push_back(fn);
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);

    SmallVector<Value> results = build(b, loc, entry->getArguments());
    ASSERT_FALSE(results.empty());
    Operation *op = results.front().getDefiningOp();

    // One cotangent argument per result; f = sum of <result_i, w_i>.
    SmallVector<Value> cotangents;
    for (Value r : results)
      cotangents.push_back(entry->addArgument(r.getType(), loc));
    Value f;
    for (auto [r, w] : llvm::zip(results, cotangents)) {
      auto t = llvm::cast<RankedTensorType>(r.getType());
      SmallVector<int64_t> all;
      for (int64_t i = 0; i < t.getRank(); ++i)
        all.push_back(i);
      Value prod = b.create<MulOp>(loc, r, w);
      Value s = t.getRank() == 0
                    ? prod
                    : b.create<ReduceSumOp>(loc, RankedTensorType::get({}, f64),
                                            prod, b.getDenseI64ArrayAttr(all))
                          .getResult();
      f = f ? b.create<AddOp>(loc, f, s).getResult() : s;
    }

    auto diff = llvm::cast<DifferentiableOpInterface>(op);
    SmallVector<bool> needed;
    for (Value operand : op->getOperands())
      needed.push_back(llvm::isa<FloatType>(
          llvm::cast<RankedTensorType>(operand.getType()).getElementType()));
    SmallVector<Value> grads;
    ASSERT_TRUE(succeeded(diff.buildVJP(b, cotangents, needed, grads)));
    ASSERT_EQ(grads.size(), op->getNumOperands());

    SmallVector<Value> returned{f};
    SmallVector<int> gradOf; // operand index of each returned adjoint
    for (auto [i, g] : llvm::enumerate(grads)) {
      if (!needed[i]) {
        EXPECT_FALSE(g) << "adjoint built for a non-float operand";
        continue;
      }
      ASSERT_TRUE(g) << "no adjoint for float operand " << i;
      ASSERT_EQ(g.getType(), op->getOperand(i).getType());
      returned.push_back(g);
      gradOf.push_back(i);
    }
    b.create<func::ReturnOp>(loc, returned);
    fn.setType(b.getFunctionType(entry->getArgumentTypes(),
                                 ValueRange(returned).getTypes()));
    ASSERT_TRUE(succeeded(verify(module)));

    // Inputs: the op's operands as the function's leading arguments, then
    // cotangents.
    std::mt19937_64 rng(1234);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<Tensor> inputs;
    for (const Arg &a : args) {
      Tensor t(a.shape);
      for (int64_t i = 0; i < t.numel(); ++i) {
        switch (a.draw) {
        case Draw::Normal:
          t.data[i] = normal(rng);
          break;
        case Draw::Positive:
          t.data[i] = 0.5 + std::abs(normal(rng));
          break;
        case Draw::Ids:
        case Draw::Labels:
          t.data[i] = static_cast<double>(rng() % a.range);
          break;
        }
      }
      if (a.draw == Draw::Labels)
        t.data[0] = -1; // an ignored position
      inputs.push_back(std::move(t));
    }
    for (Value w : cotangents) {
      Tensor t(shapeOf(w));
      for (double &v : t.data)
        v = normal(rng);
      inputs.push_back(std::move(t));
    }

    interp::Interpreter interp(module);
    auto eval = [&](const std::vector<Tensor> &in) {
      auto out = interp.call(fn, in);
      EXPECT_TRUE(succeeded(out));
      return *out;
    };
    std::vector<Tensor> analytic = eval(inputs);

    // Map function arguments back to op operands (builders may reorder or reuse
    // them).
    for (auto [k, operandIndex] : llvm::enumerate(gradOf)) {
      auto arg = llvm::dyn_cast<BlockArgument>(op->getOperand(operandIndex));
      ASSERT_TRUE(arg)
          << "operands of the op under test must be function arguments";
      unsigned argIndex = arg.getArgNumber();
      const Tensor &g = analytic[k + 1];
      const double h = 1e-6;
      for (int64_t e = 0; e < inputs[argIndex].numel(); ++e) {
        std::vector<Tensor> plus = inputs, minus = inputs;
        plus[argIndex].data[e] += h;
        minus[argIndex].data[e] -= h;
        double fd = (eval(plus)[0].data[0] - eval(minus)[0].data[0]) / (2 * h);
        EXPECT_NEAR(g.data[e], fd, tol * std::max(1.0, std::abs(fd)))
            << op->getName().getStringRef().str() << " operand " << operandIndex
            << " element " << e;
      }
    }
    module.erase();
  }

  MLIRContext ctx;
};

RankedTensorType f64(MLIRContext *ctx, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, Float64Type::get(ctx));
}

/// Builds a result type from the op's context at build time.
RankedTensorType f64Of(OpBuilder &b, ArrayRef<int64_t> shape) {
  return f64(b.getContext(), shape);
}

template <typename OpT> BuildFn unaryOp() {
  return [](OpBuilder &b, Location loc, ValueRange a) -> SmallVector<Value> {
    return {b.create<OpT>(loc, a[0])};
  };
}

template <typename OpT> BuildFn binaryOp() {
  return [](OpBuilder &b, Location loc, ValueRange a) -> SmallVector<Value> {
    return {b.create<OpT>(loc, a[0], a[1])};
  };
}

/// Matmul in all four layouts; shapes given in stored form.
BuildFn matmulOp(std::vector<int64_t> out, bool ta, bool tb) {
  return [=](OpBuilder &b, Location loc, ValueRange a) -> SmallVector<Value> {
    auto op = b.create<MatmulOp>(loc, f64Of(b, out), a[0], a[1]);
    op.setTransposeLhs(ta);
    op.setTransposeRhs(tb);
    return {op};
  };
}

BuildFn attentionOp(bool causal) {
  return [=](OpBuilder &b, Location loc, ValueRange a) -> SmallVector<Value> {
    auto op = b.create<AttentionOp>(loc, a[0].getType(),
                                    AttentionOp::lseType(a[0].getType()), a[0],
                                    a[1], a[2]);
    op.setCausal(causal);
    return {op.getResult()};
  };
}

BuildFn convertTo(std::vector<int64_t> shape) {
  return [=](OpBuilder &b, Location loc, ValueRange a) -> SmallVector<Value> {
    return {b.create<ConvertOp>(loc, f64Of(b, shape), a[0])};
  };
}

std::vector<Case> allCases() {
  using V = SmallVector<Value>;
  using L = Location;
  using R = ValueRange;
  const Arg x34{{3, 4}}, x23{{2, 3}}, pos23{{2, 3}, Draw::Positive};
  return {
      {"Neg", {x34}, unaryOp<NegOp>()},
      {"Relu", {x34}, unaryOp<ReluOp>()},
      {"Gelu", {x34}, unaryOp<GeluOp>()},
      {"GeluErf", {x34}, unaryOp<GeluErfOp>()},
      {"Tanh", {x34}, unaryOp<TanhOp>()},
      {"Sigmoid", {x34}, unaryOp<SigmoidOp>()},
      {"Exp", {x34}, unaryOp<ExpOp>()},
      {"Log", {{{3, 4}, Draw::Positive}}, unaryOp<LogOp>()},
      {"Sqrt", {{{3, 4}, Draw::Positive}}, unaryOp<SqrtOp>()},
      {"ConvertFloatToFloat", {{{5}}}, convertTo({5})},
      {"ConvertIntToFloatHasNoAdjoint", {{{5}, Draw::Ids, 9}}, convertTo({5})},
      {"Add", {x23, x23}, binaryOp<AddOp>()},
      {"Sub", {x23, x23}, binaryOp<SubOp>()},
      {"Mul", {x23, x23}, binaryOp<MulOp>()},
      {"Div", {x23, pos23}, binaryOp<DivOp>()},
      {"Pow", {pos23, x23}, binaryOp<PowOp>(), 1e-5},
      // Random normals are distinct almost surely: max/min are differentiable
      // there.
      {"Maximum", {x23, x23}, binaryOp<MaximumOp>()},
      {"Minimum", {x23, x23}, binaryOp<MinimumOp>()},
      {"BroadcastLeadingAndExpanded",
       {{{3, 1}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<BroadcastToOp>(loc, f64Of(b, {2, 3, 4}), a[0])};
       }},
      {"BroadcastScalar",
       {{{}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<BroadcastToOp>(loc, f64Of(b, {2, 3}), a[0])};
       }},
      {"Reshape",
       {{{2, 6}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<ReshapeOp>(loc, f64Of(b, {3, 2, 2}), a[0])};
       }},
      {"Transpose",
       {{{2, 3, 4}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<TransposeOp>(loc, f64Of(b, {4, 2, 3}), a[0],
                                       b.getDenseI64ArrayAttr({2, 0, 1}))};
       }},
      {"Split",
       {{{2, 7}}},
       [](OpBuilder &b, L loc, R a) -> V {
         auto s = b.create<SplitOp>(
             loc, TypeRange{f64Of(b, {2, 3}), f64Of(b, {2, 4})}, a[0], 1);
         return V(s.getResults());
       }},
      {"SliceMiddle",
       {{{2, 7}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<SliceOp>(loc, f64Of(b, {2, 3}), a[0],
                                   b.getI64IntegerAttr(1),
                                   b.getI64IntegerAttr(2))};
       }},
      {"SliceFirst",
       {{{3, 4, 2}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<SliceOp>(loc, f64Of(b, {3, 1, 2}), a[0],
                                   b.getI64IntegerAttr(1),
                                   b.getI64IntegerAttr(0))};
       }},
      {"Concat",
       {x23, {{1, 3}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<ConcatOp>(loc, f64Of(b, {3, 3}),
                                    ValueRange{a[0], a[1]}, 0)};
       }},
      {"ReduceSum",
       {{{2, 3, 4}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<ReduceSumOp>(loc, f64Of(b, {3}), a[0],
                                       b.getDenseI64ArrayAttr({0, 2}))};
       }},
      {"Matmul", {{{3, 4}}, {{4, 5}}}, matmulOp({3, 5}, false, false)},
      {"MatmulTransposeRhs",
       {{{3, 4}}, {{5, 4}}},
       matmulOp({3, 5}, false, true)},
      {"MatmulTransposeLhs",
       {{{4, 3}}, {{4, 5}}},
       matmulOp({3, 5}, true, false)},
      {"MatmulTransposeBoth",
       {{{4, 3}}, {{5, 4}}},
       matmulOp({3, 5}, true, true)},
      {"MatmulBatched",
       {{{2, 3, 4}}, {{2, 4, 2}}},
       matmulOp({2, 3, 2}, false, false)},
      {"SoftmaxLastAxis",
       {{{3, 5}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<SoftmaxOp>(loc, a[0], 1)};
       }},
      {"SoftmaxInnerAxis",
       {{{3, 4, 2}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<SoftmaxOp>(loc, a[0], 1)};
       }},
      {"LayerNorm",
       {{{3, 6}}, {{6}}, {{6}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<LayerNormOp>(loc, a[0].getType(), a[0], a[1], a[2],
                                       b.getF64FloatAttr(1e-5))};
       }},
      {"Rope",
       {{{2, 3, 4, 6}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<RopeOp>(loc, a[0], b.getF64FloatAttr(100.0),
                                  UnitAttr(), DenseF64ArrayAttr())};
       }},
      // LLaMA 3's scaling: of the 3 pairs' wavelengths (6.3, 29, 135) one is
      // below 30/4 (kept), one between (blended), one above 30 (divided).
      {"RopeScaled",
       {{{2, 3, 4, 6}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<RopeOp>(
             loc, a[0], b.getF64FloatAttr(100.0), UnitAttr(),
             b.getDenseF64ArrayAttr({3.0, 1.0, 4.0, 30.0}))};
       }},
      // Padding on one side only; then strides, dilation and two groups.
      {"Conv2d",
       {{{2, 3, 5, 6}}, {{4, 3, 3, 2}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<Conv2dOp>(
             loc, f64Of(b, {2, 4, 5, 5}), a[0], a[1],
             b.getDenseI64ArrayAttr({1, 1}), b.getDenseI64ArrayAttr({1, 0}),
             b.getDenseI64ArrayAttr({1, 1}), b.getI64IntegerAttr(1))};
       }},
      {"Conv2dStridedDilatedGrouped",
       {{{1, 4, 7, 7}}, {{6, 2, 3, 3}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<Conv2dOp>(
             loc, f64Of(b, {1, 6, 3, 9}), a[0], a[1],
             b.getDenseI64ArrayAttr({2, 1}), b.getDenseI64ArrayAttr({1, 2}),
             b.getDenseI64ArrayAttr({2, 1}), b.getI64IntegerAttr(2))};
       }},
      // Overlapping windows (their adjoints add up) with padding.
      {"MaxPool2d",
       {{{2, 3, 5, 6}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<MaxPool2dOp>(
             loc, f64Of(b, {2, 3, 3, 3}), a[0], b.getDenseI64ArrayAttr({3, 2}),
             b.getDenseI64ArrayAttr({2, 2}), b.getDenseI64ArrayAttr({1, 0}))};
       }},
      {"AvgPool2d",
       {{{2, 3, 5, 6}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<AvgPool2dOp>(
             loc, f64Of(b, {2, 3, 3, 3}), a[0], b.getDenseI64ArrayAttr({3, 2}),
             b.getDenseI64ArrayAttr({2, 2}), b.getDenseI64ArrayAttr({1, 0}))};
       }},
      // A block of a larger tensor in micro-batch 1 of step 5: a fixed mask,
      // so linear, its gradient the same dropout of the adjoint.
      {"Dropout",
       {{{3, 4, 6}}},
       [](OpBuilder &b, L loc, R a) -> V {
         auto i64 = [&](int64_t v) -> Value {
           return b.create<ConstantOp>(
               loc, DenseElementsAttr::get(
                        RankedTensorType::get({}, b.getI64Type()),
                        b.getI64IntegerAttr(v)));
         };
         SmallVector<Value> firsts{i64(3), i64(0), i64(6)};
         return {b.create<DropoutOp>(loc, a[0], i64(5), i64(1), firsts,
                                     b.getF64FloatAttr(0.4),
                                     b.getI64IntegerAttr(9),
                                     b.getI64IntegerAttr(2),
                                     b.getDenseI64ArrayAttr({6, 4, 12}))};
       }},
      {"RMSNorm",
       {{{3, 6}}, {{6}}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<RMSNormOp>(loc, a[0].getType(), a[0], a[1],
                                     b.getF64FloatAttr(1e-6))};
       }},
      {"Embedding",
       {{{5, 3}}, {{2, 4}, Draw::Ids, 5}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<EmbeddingOp>(loc, f64Of(b, {2, 4, 3}), a[0], a[1])};
       }},
      {"CrossEntropyWithIgnoredLabel",
       {{{6, 4}}, {{6}, Draw::Labels, 4}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<CrossEntropyOp>(loc, f64Of(b, {}), a[0], a[1])};
       }},
      {"CrossEntropySequence",
       {{{2, 3, 5}}, {{2, 3}, Draw::Labels, 5}},
       [](OpBuilder &b, L loc, R a) -> V {
         return {b.create<CrossEntropyOp>(loc, f64Of(b, {}), a[0], a[1])};
       }},
      {"Attention",
       {{{2, 2, 4, 3}}, {{2, 2, 4, 3}}, {{2, 2, 4, 3}}},
       attentionOp(false)},
      {"AttentionCausal",
       {{{1, 2, 5, 3}}, {{1, 2, 5, 3}}, {{1, 2, 5, 3}}},
       attentionOp(true)},
  };
}

class VJPTest : public ::testing::TestWithParam<Case> {};

TEST_P(VJPTest, MatchesFiniteDifferences) {
  VJPChecker checker;
  checker.check(GetParam().args, GetParam().build, GetParam().tol);
}

INSTANTIATE_TEST_SUITE_P(AllOps, VJPTest, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.name;
                         });

TEST(VJPCoverage, EveryDifferentiableOpHasACase) {
  VJPChecker checker;
  std::set<std::string> covered;
  for (const Case &c : allCases())
    covered.insert(checker.opName(c));
  int differentiable = 0;
  for (RegisteredOperationName name : checker.ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "dt" ||
        !name.hasInterface<DifferentiableOpInterface>())
      continue;
    ++differentiable;
    EXPECT_TRUE(covered.count(name.getStringRef().str()))
        << name.getStringRef().str()
        << " has a VJP but no finite-difference case";
  }
  EXPECT_GT(differentiable, 20);
}

} // namespace
