//===- ShapeTest.cpp - Tests of broadcasting and matrix-product shapes ----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// NumPy broadcasting and matmul rules on symbolic shapes, with leading-dims
// variables and unknown ranks.
//
//===----------------------------------------------------------------------===//

#include "Shape.h"

#include "gtest/gtest.h"

using namespace dt;
using namespace dt::sema;

namespace {
class ShapeTest : public ::testing::Test {
protected:
  SymContext syms;
  SymExpr b = syms.symbol("B"), t = syms.symbol("T"), w = syms.symbol("w");

  Shape shape(std::initializer_list<SymExpr> dims, int ellipsis = -1) {
    Shape s;
    s.ellipsis = ellipsis;
    s.dims.assign(dims.begin(), dims.end());
    return s;
  }
  std::string broadcast(const Shape &a, const Shape &c) {
    std::pair<SymExpr, SymExpr> mismatch;
    std::optional<Shape> r = broadcastShapes(a, c, syms, &mismatch);
    return r ? str(*r, syms)
             : "mismatch " + syms.str(mismatch.first) + " vs " +
                   syms.str(mismatch.second);
  }
  std::string matmul(const Shape &a, const Shape &c) {
    std::string error;
    std::optional<Shape> r = matmulShape(a, c, syms, error);
    return r ? str(*r, syms) : "error: " + error;
  }
};

TEST_F(ShapeTest, Broadcast) {
  EXPECT_EQ(broadcast(shape({b, t, w}), shape({w})), "[B, T, w]");
  EXPECT_EQ(broadcast(shape({t, w}), shape({b, 1, w})), "[B, T, w]");
  EXPECT_EQ(broadcast(shape({b, 1}), shape({1, 8})), "[B, 8]");
  EXPECT_EQ(broadcast(shape({}), shape({b, 4})), "[B, 4]");
  EXPECT_EQ(broadcast(shape({b, 8}), shape({5})), "mismatch 8 vs 5");
  // Unknown equality (B vs T) is not an error.
  EXPECT_EQ(broadcast(shape({b}), shape({t})), "[B]");
}

TEST_F(ShapeTest, BroadcastWithLeadingDims) {
  EXPECT_EQ(broadcast(shape({w}, 0), shape({w})), "[..., w]");
  EXPECT_EQ(broadcast(shape({w}, 0), shape({w}, 0)), "[..., w]");
  // Different leading-dims variables, or a longer other side: unknown rank.
  EXPECT_EQ(broadcast(shape({w}, 0), shape({w}, 1)), "[?]");
  EXPECT_EQ(broadcast(shape({w}, 0), shape({b, t, w})), "[?]");
  EXPECT_EQ(broadcast(Shape::unknown(), shape({w})), "[?]");
}

TEST_F(ShapeTest, MatMul) {
  EXPECT_EQ(matmul(shape({b, 784}), shape({784, 256})), "[B, 256]");
  EXPECT_EQ(matmul(shape({b, t, w}), shape({w, 64})), "[B, T, 64]");
  EXPECT_EQ(matmul(shape({b, 4, t, 8}), shape({b, 4, 8, t})), "[B, 4, T, T]");
  EXPECT_EQ(matmul(shape({w}, 0), shape({w, 3})), "[?]");
  EXPECT_EQ(matmul(shape({t, w}, 0), shape({w, 3})), "[..., T, 3]");
  // Vectors, as numpy.matmul.
  EXPECT_EQ(matmul(shape({8}), shape({8, 3})), "[3]");
  EXPECT_EQ(matmul(shape({3, 8}), shape({8})), "[3]");
  EXPECT_EQ(matmul(shape({8}), shape({8})), "[]");
  EXPECT_EQ(matmul(shape({b, 8}), shape({4, 3})),
            "error: the inner dimensions differ: 8 and 4");
  EXPECT_EQ(matmul(shape({2, 3, 4}), shape({5, 4, 6})),
            "error: the batch dimensions 2 and 5 do not broadcast");
  EXPECT_EQ(matmul(shape({}), shape({4, 3})).substr(0, 6), "error:");
}

TEST_F(ShapeTest, Printing) {
  EXPECT_EQ(str(DType::BF16, shape({b, w}), syms), "bf16[B, w]");
  EXPECT_EQ(str(DType::I32, shape({}, 0), syms), "i32[...]");
  EXPECT_EQ(str(DType::F32, shape({}), syms), "f32[]");
  Shape concrete = shape({2, 3});
  ASSERT_TRUE(concrete.getConcrete());
  EXPECT_EQ((*concrete.getConcrete())[1], 3);
  EXPECT_FALSE(shape({b}).getConcrete());
}
} // namespace
