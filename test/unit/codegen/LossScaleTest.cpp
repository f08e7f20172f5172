//===- LossScaleTest.cpp - dynamic loss scaling, compiled -----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// `precision = f16` trains with dynamic loss scaling (dt-autodiff seeds
// backward with the scale, dt-optimizer divides it out, skips a step whose
// gradients overflowed and moves the scale). These tests run a small f16 MLP
// through the real pipeline and check what the compiled steps do: gradients
// come out scaled, a step with an inf in a gradient changes no parameter and
// no optimizer state bit for bit and halves the scale, and clean steps double
// it after the growth interval.
//
//===----------------------------------------------------------------------===//

#include "Harness.h"

#include "dt/Transforms/Passes.h"

#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace mlir;
using namespace dt::test;

namespace {

const char *kMLP = R"mlir(
module attributes {dt.optimizer = {kind = "adam", lr = 1.0e-2 : f64},
                   dt.precision = "f16",
                   dt.loss_scale = {init = 1024.0 : f64, growth_interval = 2 : i64}} {
  dt.global param @w1 : tensor<16x8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.3 : f64}}
  dt.global param @w2 : tensor<4x16xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.3 : f64}}
  dt.global input @"in/train.x" : tensor<32x8xf32>
  dt.global input @"in/train.y" : tensor<32xi32>
  func.func @loss() -> tensor<f32> {
    %x = dt.load @"in/train.x" : tensor<32x8xf32>
    %y = dt.load @"in/train.y" : tensor<32xi32>
    %w1 = dt.load @w1 : tensor<16x8xf32>
    %w2 = dt.load @w2 : tensor<4x16xf32>
    %h = dt.matmul %x, %w1 {transpose_rhs} : tensor<32x8xf32>, tensor<16x8xf32> -> tensor<32x16xf32>
    %r = dt.relu %h : tensor<32x16xf32>
    %o = dt.matmul %r, %w2 {transpose_rhs} : tensor<32x16xf32>, tensor<4x16xf32> -> tensor<32x4xf32>
    %l = dt.cross_entropy %o, %y : tensor<32x4xf32>, tensor<32xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
)mlir";

class LossScaleTest : public ::testing::Test {
protected:
  LossScaleTest() { loadPipelineDialects(ctx); }

  /// Plans and compiles kMLP, with or without its f16 attributes, and fills
  /// its globals from one seed.
  std::unique_ptr<CompiledProgram> build(bool f16,
                                         OwningOpRef<ModuleOp> &module) {
    module = parseSourceString<ModuleOp>(kMLP, &ctx);
    if (!module)
      return nullptr;
    if (!f16) {
      (*module)->removeAttr("dt.precision");
      (*module)->removeAttr(dt::names::kLossScaleAttr);
    }
    if (failed(planModule(*module)))
      return nullptr;
    std::string error;
    std::unique_ptr<CompiledProgram> p =
        CompiledProgram::compile(*module, error);
    EXPECT_TRUE(p) << error;
    if (!p)
      return nullptr;
    std::mt19937_64 rng(11);
    std::normal_distribution<double> normal(0.0, 0.5);
    for (dt::GlobalOp g : module->getOps<dt::GlobalOp>()) {
      std::vector<double> v(g.getTensorType().getNumElements(), 0.0);
      for (double &x : v)
        if (g.getTensorType().getElementType().isInteger(32))
          x = double(rng() % 4);
        else if (g.getRole() == dt::Role::param ||
                 g.getRole() == dt::Role::input)
          x = normal(rng);
      writeGlobal(p->arena(), g, v);
    }
    return p;
  }

  std::vector<double> read(CompiledProgram &p, ModuleOp m, StringRef name) {
    return readGlobal(p.arena(), dt::lookupGlobal(m, name));
  }
  double scalar(CompiledProgram &p, ModuleOp m, StringRef name) {
    return read(p, m, name).at(0);
  }

  MLIRContext ctx;
};

TEST_F(LossScaleTest, BackwardStartsFromTheScale) {
  OwningOpRef<ModuleOp> m16, m32;
  std::unique_ptr<CompiledProgram> f16 = build(true, m16),
                                   f32 = build(false, m32);
  ASSERT_TRUE(f16 && f32);
  f16->call("grad_step");
  f32->call("grad_step");
  std::vector<double> scaled = read(*f16, *m16, "grad/w1"),
                      plain = read(*f32, *m32, "grad/w1");
  double worst = 0, norm = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    worst = std::max(worst, std::abs(scaled[i] / 1024.0 - plain[i]));
    norm = std::max(norm, std::abs(plain[i]));
  }
  // f16 carries 11 significant bits.
  EXPECT_LE(worst, 1e-2 * norm) << "largest gradient " << norm;
}

TEST_F(LossScaleTest, AnOverflowSkipsTheStepAndHalvesTheScale) {
  OwningOpRef<ModuleOp> m;
  std::unique_ptr<CompiledProgram> p = build(true, m);
  ASSERT_TRUE(p);

  // A clean step: parameters move, nothing is skipped.
  std::vector<double> w0 = read(*p, *m, "w1");
  p->call("grad_step");
  p->call("apply_step");
  EXPECT_NE(read(*p, *m, "w1"), w0);
  EXPECT_EQ(scalar(*p, *m, dt::names::kLossScaleOut), 1024.0);
  EXPECT_EQ(scalar(*p, *m, dt::names::kSkippedOut), 0.0);
  EXPECT_EQ(scalar(*p, *m, dt::names::kCleanSteps), 1.0);

  // An inf in one gradient element: every parameter and moment keeps its
  // bits, the scale halves, the skip is counted, the step counter moves on.
  std::vector<double> w1 = read(*p, *m, "w1"), w2 = read(*p, *m, "w2"),
                      m1 = read(*p, *m, "adam.m/w1"),
                      v2 = read(*p, *m, "adam.v/w2");
  p->call("grad_step");
  dt::GlobalOp grad = dt::lookupGlobal(*m, "grad/w2");
  std::vector<double> g = readGlobal(p->arena(), grad);
  g[3] = std::numeric_limits<double>::infinity();
  writeGlobal(p->arena(), grad, g);
  p->call("apply_step");
  EXPECT_EQ(read(*p, *m, "w1"), w1);
  EXPECT_EQ(read(*p, *m, "w2"), w2);
  EXPECT_EQ(read(*p, *m, "adam.m/w1"), m1);
  EXPECT_EQ(read(*p, *m, "adam.v/w2"), v2);
  EXPECT_EQ(scalar(*p, *m, dt::names::kLossScaleOut), 512.0);
  EXPECT_EQ(scalar(*p, *m, dt::names::kSkippedOut), 1.0);
  EXPECT_EQ(scalar(*p, *m, dt::names::kCleanSteps), 0.0);
  EXPECT_EQ(scalar(*p, *m, "step"), 2.0);
  EXPECT_TRUE(std::isinf(scalar(*p, *m, "out/grad_norm")));

  // Two clean steps in a row (the growth interval) double it again.
  for (int i = 0; i < 2; ++i) {
    p->call("grad_step");
    p->call("apply_step");
  }
  EXPECT_NE(read(*p, *m, "w1"), w1);
  EXPECT_EQ(scalar(*p, *m, dt::names::kLossScaleOut), 1024.0);
  EXPECT_EQ(scalar(*p, *m, dt::names::kScaleExp), 0.0);
  EXPECT_EQ(scalar(*p, *m, dt::names::kCleanSteps), 0.0);
  EXPECT_EQ(scalar(*p, *m, dt::names::kSkippedOut), 1.0);
}

TEST_F(LossScaleTest, AdamCountsOnlyTheUpdatesItMade) {
  // Run A: a clean step, a skipped one, a clean one. Run B: two clean steps.
  // With the same inputs, A's third step sees B's second step's parameters,
  // and the scale differs by a power of 2, which f16 represents exactly: if
  // Adam's bias correction counts applied updates only (as PyTorch's does),
  // the runs end with the same bits.
  OwningOpRef<ModuleOp> ma, mb;
  std::unique_ptr<CompiledProgram> a = build(true, ma), b = build(true, mb);
  ASSERT_TRUE(a && b);
  a->call("grad_step");
  a->call("apply_step");
  a->call("grad_step");
  dt::GlobalOp grad = dt::lookupGlobal(*ma, "grad/w1");
  std::vector<double> g = readGlobal(a->arena(), grad);
  g[0] = std::numeric_limits<double>::quiet_NaN();
  writeGlobal(a->arena(), grad, g);
  a->call("apply_step");
  ASSERT_EQ(scalar(*a, *ma, dt::names::kSkippedOut), 1.0);
  a->call("grad_step");
  a->call("apply_step");
  for (int i = 0; i < 2; ++i) {
    b->call("grad_step");
    b->call("apply_step");
  }
  for (StringRef name : {"w1", "w2", "adam.m/w1", "adam.v/w2"})
    EXPECT_EQ(read(*a, *ma, name), read(*b, *mb, name)) << name.str();
}

} // namespace
