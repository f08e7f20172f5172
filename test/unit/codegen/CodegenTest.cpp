//===- CodegenTest.cpp - compiled train steps against the interpreter -----===//
//
// Takes small training programs through the real pipeline (autodiff, optimizer,
// fusion, memory planning, lowering, LLVM -O3), runs the compiled entry points
// in-process with MLIR's ExecutionEngine on an arena, and runs the same planned
// module with the reference interpreter. After every entry-point call, every
// global (parameters, gradients, optimizer state, outputs) must agree. This
// checks fusion, the memory plan (in-place updates, buffer reuse), the lowering
// and the kernels together.
//
//===----------------------------------------------------------------------===//

#include "Harness.h"

#include "dt/Transforms/Passes.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir;
using namespace dt::test;
using dt::interp::Tensor;

namespace {

const char *kMLP = R"mlir(
module attributes {dt.optimizer = {kind = "adamw", lr = 1.0e-2 : f64, weight_decay = 0.1 : f64},
                   dt.schedule = {kind = "cosine", warmup = 1 : i64}, dt.clip = 0.5 : f64} {
  dt.global param @"fc1.weight" : tensor<16x8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.3 : f64}}
  dt.global param @"fc1.bias" : tensor<16xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.3 : f64}}
  dt.global param @"fc2.weight" : tensor<4x16xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.3 : f64}}
  dt.global input @"in/train.x" : tensor<32x8xf32>
  dt.global input @"in/train.y" : tensor<32xi32>
  func.func @loss() -> tensor<f32> {
    %x = dt.load @"in/train.x" : tensor<32x8xf32>
    %y = dt.load @"in/train.y" : tensor<32xi32>
    %w1 = dt.load @"fc1.weight" : tensor<16x8xf32>
    %b1 = dt.load @"fc1.bias" : tensor<16xf32>
    %w2 = dt.load @"fc2.weight" : tensor<4x16xf32>
    %t1 = dt.transpose %w1 [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
    %h = dt.matmul %x, %t1 : tensor<32x8xf32>, tensor<8x16xf32> -> tensor<32x16xf32>
    %bb = dt.broadcast_to %b1 : tensor<16xf32> -> tensor<32x16xf32>
    %hb = dt.add %h, %bb : tensor<32x16xf32>
    %r = dt.relu %hb : tensor<32x16xf32>
    %o = dt.matmul %r, %w2 {transpose_rhs} : tensor<32x16xf32>, tensor<4x16xf32> -> tensor<32x4xf32>
    %l = dt.cross_entropy %o, %y : tensor<32x4xf32>, tensor<32xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
)mlir";

// A toy transformer layer touching every kernel and most shape ops: tied
// embedding, positions, layer norm, qkv split, heads, rotary embeddings (the
// keys' scaled by LLaMA 3's rule: one pair blended, one divided), causal
// attention, GELU, softmax, concat, and two dropouts: one of a whole tensor,
// one of a block of a larger one (the offsets a split would give a rank).
const char *kAttention = R"mlir(
module attributes {dt.optimizer = {kind = "sgd", lr = 0.1 : f64, momentum = 0.9 : f64, nesterov = true},
                   dt.accumulation = 2 : i64} {
  dt.global param @wte : tensor<16x8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.5 : f64}}
  dt.global param @ln_w : tensor<8xf32> {init = {kind = "normal", mean = 1.0 : f64, std = 0.1 : f64}}
  dt.global param @ln_b : tensor<8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.1 : f64}}
  dt.global param @qkv : tensor<24x8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.5 : f64}}
  dt.global param @proj : tensor<16x8xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.5 : f64}}
  dt.global input @"in/train.x" : tensor<2x4xi32>
  dt.global input @"in/train.y" : tensor<2x4xi32>
  dt.global state @step : tensor<i64>
  dt.global input @"in/micro_index" : tensor<i64>
  func.func @loss() -> tensor<f32> {
    %ids = dt.load @"in/train.x" : tensor<2x4xi32>
    %st = dt.load @step : tensor<i64>
    %mi = dt.load @"in/micro_index" : tensor<i64>
    %y = dt.load @"in/train.y" : tensor<2x4xi32>
    %wte = dt.load @wte : tensor<16x8xf32>
    %lw = dt.load @ln_w : tensor<8xf32>
    %lb = dt.load @ln_b : tensor<8xf32>
    %wqkv = dt.load @qkv : tensor<24x8xf32>
    %wp = dt.load @proj : tensor<16x8xf32>
    %tok = dt.embedding %wte, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %pos = dt.iota : tensor<4xi32>
    %pe = dt.embedding %wte, %pos : tensor<16x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
    %peb = dt.broadcast_to %pe : tensor<4x8xf32> -> tensor<2x4x8xf32>
    %h0 = dt.add %tok, %peb : tensor<2x4x8xf32>
    %f0 = dt.constant dense<2> : tensor<i64>
    %f1 = dt.constant dense<0> : tensor<i64>
    %f2 = dt.constant dense<8> : tensor<i64>
    %h = dt.dropout %h0 step %st micro %mi firsts(%f0, %f1, %f2) {p = 1.0e-01 : f64, seed = 3 : i64, site = 1 : i64, shape = array<i64: 4, 4, 16>} : tensor<2x4x8xf32>
    %n0 = dt.layer_norm %h, %lw, %lb {eps = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
    %n = dt.rms_norm %n0, %lw {eps = 1.0e-6 : f64} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
    %n2 = dt.reshape %n : tensor<2x4x8xf32> -> tensor<8x8xf32>
    %qkv2 = dt.matmul %n2, %wqkv {transpose_rhs} : tensor<8x8xf32>, tensor<24x8xf32> -> tensor<8x24xf32>
    %qkv3 = dt.reshape %qkv2 : tensor<8x24xf32> -> tensor<2x4x24xf32>
    %q, %k, %v = dt.split %qkv3 axis 2 : tensor<2x4x24xf32> -> tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %q4 = dt.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %k4 = dt.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %v4 = dt.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %qt = dt.transpose %q4 [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %kt = dt.transpose %k4 [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %vt = dt.transpose %v4 [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %qr = dt.rope %qt {theta = 1.0e+04 : f64} : tensor<2x2x4x4xf32>
    %kr = dt.rope %kt {theta = 1.0e+04 : f64, scaling = array<f64: 2.0, 1.0, 4.0, 12.0>} : tensor<2x2x4x4xf32>
    %a, %lse = dt.attention %qr, %kr, %vt {causal} : tensor<2x2x4x4xf32>, tensor<2x2x4xf32>
    %at = dt.transpose %a [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
    %a2 = dt.reshape %at : tensor<2x4x2x4xf32> -> tensor<8x8xf32>
    %ge = dt.gelu_erf %a2 : tensor<8x8xf32>
    %g0 = dt.gelu %ge : tensor<8x8xf32>
    %g = dt.dropout %g0 step %st micro %mi {p = 2.5e-01 : f64, seed = 3 : i64, site = 0 : i64, shape = array<i64: 8, 8>} : tensor<8x8xf32>
    %s = dt.softmax %g axis 1 : tensor<8x8xf32>
    %n2a = dt.slice %n2 axis 1 start 0 : tensor<8x8xf32> -> tensor<8x3xf32>
    %n2b = dt.slice %n2 axis 1 start 3 : tensor<8x8xf32> -> tensor<8x5xf32>
    %c = dt.concat %s, %n2a, %n2b axis 1 : tensor<8x8xf32>, tensor<8x3xf32>, tensor<8x5xf32> -> tensor<8x16xf32>
    %o = dt.matmul %c, %wp : tensor<8x16xf32>, tensor<16x8xf32> -> tensor<8x8xf32>
    %sg = dt.sigmoid %o : tensor<8x8xf32>
    %th = dt.tanh %o : tensor<8x8xf32>
    %o2 = dt.add %o, %sg : tensor<8x8xf32>
    %o3 = dt.mul %o2, %th : tensor<8x8xf32>
    %logits = dt.matmul %o3, %wte {transpose_rhs} : tensor<8x8xf32>, tensor<16x8xf32> -> tensor<8x16xf32>
    %y2 = dt.reshape %y : tensor<2x4xi32> -> tensor<8xi32>
    %l = dt.cross_entropy %logits, %y2 : tensor<8x16xf32>, tensor<8xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
)mlir";

// A small convolutional classifier: a padded 3x3 convolution (dilated across),
// ReLU, overlapping max pooling, a strided convolution in two groups, average
// pooling with padding on one side, flattened into a linear head.
const char *kConv = R"mlir(
module attributes {dt.optimizer = {kind = "adamw", lr = 0.01 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}} {
  dt.global param @w1 : tensor<4x3x3x3xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.3 : f64}}
  dt.global param @w2 : tensor<4x2x3x3xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.3 : f64}}
  dt.global param @head : tensor<32x5xf32> {init = {kind = "normal", mean = 0.0 : f64, std = 0.3 : f64}}
  dt.global input @"in/train.x" : tensor<2x3x6x6xf32>
  dt.global input @"in/train.y" : tensor<2xi32>
  func.func @loss() -> tensor<f32> {
    %x = dt.load @"in/train.x" : tensor<2x3x6x6xf32>
    %y = dt.load @"in/train.y" : tensor<2xi32>
    %w1 = dt.load @w1 : tensor<4x3x3x3xf32>
    %w2 = dt.load @w2 : tensor<4x2x3x3xf32>
    %wh = dt.load @head : tensor<32x5xf32>
    %c1 = dt.conv2d %x, %w1 {stride = array<i64: 1, 1>, padding = array<i64: 1, 2>, dilation = array<i64: 1, 2>, groups = 1 : i64} : tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x6x6xf32>
    %r0 = dt.relu %c1 : tensor<2x4x6x6xf32>
    %r1 = dt.max_pool2d %r0 {kernel = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 1, 1>} : tensor<2x4x6x6xf32> -> tensor<2x4x6x6xf32>
    %c2 = dt.conv2d %r1, %w2 {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64} : tensor<2x4x6x6xf32>, tensor<4x2x3x3xf32> -> tensor<2x4x3x3xf32>
    %a2 = dt.avg_pool2d %c2 {kernel = array<i64: 2, 2>, stride = array<i64: 1, 1>, padding = array<i64: 1, 0>} : tensor<2x4x3x3xf32> -> tensor<2x4x4x2xf32>
    %f = dt.reshape %a2 : tensor<2x4x4x2xf32> -> tensor<2x32xf32>
    %logits = dt.matmul %f, %wh : tensor<2x32xf32>, tensor<32x5xf32> -> tensor<2x5xf32>
    %l = dt.cross_entropy %logits, %y : tensor<2x5xf32>, tensor<2xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
)mlir";

struct Program {
  const char *name;
  const char *source;
  /// The module's `dt.precision`: bf16 or f16 runs the same program with
  /// 16-bit activations (dt-autocast, dt-widen-compute), which the
  /// interpreter rounds per op as the compiled code does, up to a last bit;
  /// f16 with dynamic loss scaling, its scale growing after every step.
  const char *precision = "f32";
};
void PrintTo(const Program &p, std::ostream *os) { *os << p.name; }

class CodegenTest : public ::testing::TestWithParam<Program> {
protected:
  CodegenTest() { loadPipelineDialects(ctx); }
  MLIRContext ctx;
};

TEST_P(CodegenTest, CompiledStepsMatchTheInterpreter) {
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(GetParam().source, &ctx);
  ASSERT_TRUE(module);
  StringRef precision = GetParam().precision;
  bool bf16 = precision == "bf16", f16 = precision == "f16";
  if (bf16 || f16)
    (*module)->setAttr("dt.precision", StringAttr::get(&ctx, precision));
  if (f16) {
    Builder b(&ctx);
    (*module)->setAttr(
        dt::names::kLossScaleAttr,
        b.getDictionaryAttr(
            {b.getNamedAttr("init", b.getF64FloatAttr(65536.0)),
             b.getNamedAttr("growth_interval", b.getI64IntegerAttr(1))}));
  }

  // The real pipeline up to the planned module.
  ASSERT_TRUE(succeeded(planModule(*module)));
  OwningOpRef<ModuleOp> reference = module->clone();
  std::string error;
  std::unique_ptr<CompiledProgram> compiled =
      CompiledProgram::compile(*module, error);
  ASSERT_TRUE(compiled) << error;
  char *base = compiled->arena();

  // Random values for every global, shared by the arena and the interpreter;
  // labels and ids in range; the step starts at 0 and the run is 10 steps long.
  dt::interp::Interpreter interp(*reference);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<dt::GlobalOp> globals(reference->getOps<dt::GlobalOp>().begin(),
                                    reference->getOps<dt::GlobalOp>().end());
  for (dt::GlobalOp g : globals) {
    RankedTensorType t = g.getTensorType();
    Tensor value(t.getShape());
    for (double &v : value.data) {
      if (t.getElementType().isInteger(32))
        v = static_cast<double>(rng() % 4); // < every class/vocab count here
      else if (g.getSymName() == "step")
        v = 0;
      else if (g.getSymName() == "in/total_steps")
        v = 10;
      else if (g.getSymName() == "in/micro_index")
        v = 1;
      else if (g.getRole() == dt::Role::param || g.getRole() == dt::Role::input)
        v = static_cast<double>(static_cast<float>(normal(rng) * 0.5));
    }
    writeGlobal(base, g, value.data);
    interp.globals[g.getSymName().str()] = value;
  }

  auto step = [&](StringRef entry) {
    compiled->call(entry);
    auto ref = reference->lookupSymbol<func::FuncOp>(entry);
    ASSERT_TRUE(succeeded(interp.call(ref, {})));
    for (dt::GlobalOp g : globals) {
      if (g.getRole() == dt::Role::input)
        continue;
      const Tensor &expected = interp.globals[g.getSymName().str()];
      std::vector<double> got = readGlobal(base, g);
      for (int64_t i = 0; i < expected.numel(); ++i) {
        double want = expected.data[i];
        if (!std::isfinite(want)) {
          // An overflow both saw (f16), which loss scaling then skips.
          ASSERT_TRUE(std::isnan(want) ? std::isnan(got[i]) : got[i] == want)
              << "after " << entry.str() << ": " << g.getSymName().str()
              << "[" << i << "] is " << got[i] << ", expected " << want;
          continue;
        }
        // A value the two round to neighbouring bf16 numbers (the compiled
        // code rounds an f32 result, the interpreter a double) differs by
        // 2^-8 relative.
        double tolerance = bf16 || f16 ? 1e-4 + 5e-3 * std::abs(want)
                                       : 1e-5 + 2e-3 * std::abs(want);
        ASSERT_NEAR(got[i], want, tolerance)
            << "after " << entry.str() << ": " << g.getSymName().str() << "["
            << i << "]";
      }
    }
  };
  // Two optimizer steps (each accumulating the module's micro-batches) exercise
  // the step counter, the schedule and the optimizer state.
  int64_t accumulation = 1;
  if (auto a = (*reference)->getAttrOfType<IntegerAttr>("dt.accumulation"))
    accumulation = a.getInt();
  for (int s = 0; s < 2; ++s) {
    for (int64_t m = 0; m < accumulation; ++m)
      step("grad_step");
    step("apply_step");
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, CodegenTest,
                         ::testing::Values(
                             Program{"MLP", kMLP},
                             Program{"Attention", kAttention},
                             Program{"Conv", kConv},
                             Program{"Conv_bf16", kConv, "bf16"},
                             Program{"MLP_bf16", kMLP, "bf16"},
                             Program{"Attention_bf16", kAttention, "bf16"},
                             Program{"MLP_f16", kMLP, "f16"},
                             Program{"Attention_f16", kAttention, "f16"}),
                         [](const ::testing::TestParamInfo<Program> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
