//===- SymExprTest.cpp - Tests of symbolic integers -----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The normal form, overflow reporting, division, comparison (equal, provably
// unequal, unknown) and unification of run-time sizes.
//
//===----------------------------------------------------------------------===//

#include "SymExpr.h"

#include "gtest/gtest.h"

using namespace dt::sema;

namespace {
class SymExprTest : public ::testing::Test {
protected:
  SymContext syms;
  SymExpr b = syms.symbol("B"), t = syms.symbol("T"), w = syms.symbol("width");

  SymExpr add(const SymExpr &x, const SymExpr &y) { return *x.add(y); }
  SymExpr mul(const SymExpr &x, const SymExpr &y) { return *x.mul(y); }
};

TEST_F(SymExprTest, NormalFormMakesEqualityStructural) {
  // B*T + 2*B == 2*B + T*B
  SymExpr lhs = add(mul(b, t), mul(SymExpr(2), b));
  SymExpr rhs = add(mul(SymExpr(2), b), mul(t, b));
  EXPECT_EQ(lhs, rhs);
  EXPECT_EQ(syms.compare(lhs, rhs), SymCmp::Equal);
  EXPECT_EQ(syms.str(lhs), "2*B + B*T");
  // x - x == 0
  EXPECT_TRUE(lhs.sub(rhs)->isConstant());
  EXPECT_EQ(lhs.sub(rhs)->getConstant(), 0);
}

TEST_F(SymExprTest, Constants) {
  SymExpr c = add(SymExpr(40), SymExpr(2));
  EXPECT_EQ(c.getConstant(), 42);
  EXPECT_EQ(syms.str(c), "42");
  EXPECT_EQ(syms.str(SymExpr(0)), "0");
  EXPECT_EQ(syms.str(*SymExpr(5).neg()), "-5");
}

TEST_F(SymExprTest, OverflowIsReported) {
  SymExpr big(INT64_MAX);
  EXPECT_FALSE(big.add(SymExpr(1)));
  EXPECT_FALSE(big.mul(SymExpr(2)));
  EXPECT_FALSE(SymExpr(INT64_MIN).neg());
  EXPECT_TRUE(big.add(SymExpr(-1)));
}

TEST_F(SymExprTest, SizeIsBounded) {
  // (a1 + ... + a8)^k grows combinatorially; past kMaxTerms it is refused.
  SymExpr sum;
  for (int i = 0; i < 8; ++i)
    sum = add(sum, syms.symbol("a" + std::to_string(i)));
  std::optional<SymExpr> power = sum;
  int k = 1;
  while (power && k < 10) {
    power = power->mul(sum);
    ++k;
  }
  EXPECT_FALSE(power);
  EXPECT_LT(k, 10);
}

TEST_F(SymExprTest, ProvablyUnequal) {
  EXPECT_EQ(syms.compare(SymExpr(256), SymExpr(128)), SymCmp::Unequal);
  // Sizes are at least 1, so w and 3*w differ.
  EXPECT_EQ(syms.compare(w, mul(SymExpr(3), w)), SymCmp::Unequal);
  EXPECT_EQ(syms.compare(w, add(w, SymExpr(1))), SymCmp::Unequal);
  // B and T may be equal; B and 4 too.
  EXPECT_EQ(syms.compare(b, t), SymCmp::Unknown);
  EXPECT_EQ(syms.compare(b, SymExpr(4)), SymCmp::Unknown);
}

TEST_F(SymExprTest, ExactDivision) {
  SymContext::Quotient q = syms.divide(mul(SymExpr(3), w), SymExpr(3));
  ASSERT_EQ(q.kind, SymContext::Quotient::Kind::Exact);
  EXPECT_EQ(q.value, w);
  q = syms.divide(mul(b, w), b);
  ASSERT_EQ(q.kind, SymContext::Quotient::Kind::Exact);
  EXPECT_EQ(q.value, w);
  q = syms.divide(SymExpr(128), SymExpr(4));
  ASSERT_EQ(q.kind, SymContext::Quotient::Kind::Exact);
  EXPECT_EQ(q.value.getConstant(), 32);
}

TEST_F(SymExprTest, InexactDivision) {
  SymContext::Quotient q = syms.divide(SymExpr(100), SymExpr(3));
  ASSERT_EQ(q.kind, SymContext::Quotient::Kind::NotIntegral);
  EXPECT_NEAR(q.approx, 33.333, 1e-3);
  // 12*B / (5*B) cancels B: 12/5 is not an integer.
  q = syms.divide(mul(SymExpr(12), b), mul(SymExpr(5), b));
  EXPECT_EQ(q.kind, SymContext::Quotient::Kind::NotIntegral);
  EXPECT_EQ(syms.divide(w, SymExpr(0)).kind,
            SymContext::Quotient::Kind::DivByZero);
}

TEST_F(SymExprTest, UndecidedDivisionIsAnInternedAtom) {
  SymExpr heads = syms.symbol("heads");
  SymContext::Quotient q1 = syms.divide(w, heads);
  SymContext::Quotient q2 = syms.divide(w, heads);
  ASSERT_EQ(q1.kind, SymContext::Quotient::Kind::Atom);
  EXPECT_EQ(q1.value, q2.value);
  EXPECT_EQ(syms.str(q1.value), "width/heads");
  // heads * (width / heads) is not simplified, so it compares as unknown.
  EXPECT_EQ(syms.compare(mul(heads, q1.value), w), SymCmp::Unknown);
}

TEST_F(SymExprTest, RuntimeSizesUnifyOnce) {
  SymExpr pixels = syms.runtimeSize("pixels");
  EXPECT_EQ(syms.compare(pixels, SymExpr(784)), SymCmp::Equal);
  EXPECT_EQ(syms.resolve(pixels).getConstant(), 784);
  EXPECT_EQ(syms.compare(pixels, SymExpr(10)), SymCmp::Unequal);
  SymExpr rows = syms.runtimeSize("rows");
  EXPECT_EQ(syms.compare(rows, SymExpr(28), /*unify=*/false), SymCmp::Unknown);
  EXPECT_FALSE(syms.getBinding(rows.getAtom().value()));
}
} // namespace
