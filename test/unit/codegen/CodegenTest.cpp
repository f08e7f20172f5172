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
//===----------------------------------------------------------------------------===//

#include "dt/Conversion/Passes.h"
#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Interpreter/Interpreter.h"
#include "dt/Transforms/Passes.h"
#include "dtk/kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

using namespace mlir;
using dt::interp::Tensor;

// Kernels report data faults through the runtime; in this test a fault is a
// bug.
extern "C" void dtk_fail(const char *message) {
  fprintf(stderr, "kernel fault: %s\n", message);
  std::abort();
}

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
// embedding, positions, layer norm, qkv split, heads, causal attention, GELU,
// softmax, concat.
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
  func.func @loss() -> tensor<f32> {
    %ids = dt.load @"in/train.x" : tensor<2x4xi32>
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
    %h = dt.add %tok, %peb : tensor<2x4x8xf32>
    %n = dt.layer_norm %h, %lw, %lb {eps = 1.0e-5 : f64} : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
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
    %a = dt.attention %qt, %kt, %vt {causal} : tensor<2x2x4x4xf32>
    %at = dt.transpose %a [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
    %a2 = dt.reshape %at : tensor<2x4x2x4xf32> -> tensor<8x8xf32>
    %g = dt.gelu %a2 : tensor<8x8xf32>
    %s = dt.softmax %g axis 1 : tensor<8x8xf32>
    %c = dt.concat %s, %n2 axis 1 : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x16xf32>
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

struct Program {
  const char *name;
  const char *source;
};
void PrintTo(const Program &p, std::ostream *os) { *os << p.name; }

class CodegenTest : public ::testing::TestWithParam<Program> {
protected:
  CodegenTest() {
    ctx.loadDialect<dt::DTDialect, func::FuncDialect, arith::ArithDialect,
                    math::MathDialect, linalg::LinalgDialect,
                    memref::MemRefDialect, scf::SCFDialect, LLVM::LLVMDialect,
                    vector::VectorDialect>();
    registerBuiltinDialectTranslation(ctx);
    registerLLVMDialectTranslation(ctx);
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  }
  MLIRContext ctx;
};

int64_t bytesOf(Type elem) { return elem.getIntOrFloatBitWidth() / 8; }

void writeElement(char *p, Type elem, double v) {
  if (elem.isF32()) {
    float f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
  } else if (elem.isInteger(32)) {
    int32_t i = static_cast<int32_t>(v);
    std::memcpy(p, &i, 4);
  } else {
    int64_t i = static_cast<int64_t>(v);
    std::memcpy(p, &i, 8);
  }
}

double readElement(const char *p, Type elem) {
  if (elem.isF32()) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (elem.isInteger(32)) {
    int32_t i;
    std::memcpy(&i, p, 4);
    return i;
  }
  int64_t i;
  std::memcpy(&i, p, 8);
  return static_cast<double>(i);
}

llvm::orc::SymbolMap kernelSymbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap map;
  auto add = [&](const char *name, void *fn) {
    map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn),
                           llvm::JITSymbolFlags::Exported};
  };
  add("dtk_matmul_f32", (void *)&dtk_matmul_f32);
  add("dtk_softmax_f32", (void *)&dtk_softmax_f32);
  add("dtk_layer_norm_f32", (void *)&dtk_layer_norm_f32);
  add("dtk_layer_norm_grad_f32", (void *)&dtk_layer_norm_grad_f32);
  add("dtk_embedding_f32", (void *)&dtk_embedding_f32);
  add("dtk_embedding_grad_f32", (void *)&dtk_embedding_grad_f32);
  add("dtk_cross_entropy_f32", (void *)&dtk_cross_entropy_f32);
  add("dtk_cross_entropy_grad_f32", (void *)&dtk_cross_entropy_grad_f32);
  add("dtk_count_correct_f32", (void *)&dtk_count_correct_f32);
  add("dtk_attention_f32", (void *)&dtk_attention_f32);
  add("dtk_attention_grad_f32", (void *)&dtk_attention_grad_f32);
  return map;
}

TEST_P(CodegenTest, CompiledStepsMatchTheInterpreter) {
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(GetParam().source, &ctx);
  ASSERT_TRUE(module);

  // The real pipeline up to the planned module.
  PassManager pm(&ctx);
  dt::buildTrainStepPipeline(pm);
  dt::buildFuseAndPlanPipeline(pm);
  ASSERT_TRUE(succeeded(pm.run(*module)));
  OwningOpRef<ModuleOp> reference = module->clone();

  // Random values for every global, shared by the arena and the interpreter;
  // labels and ids in range; the step starts at 0 and the run is 10 steps long.
  int64_t arenaBytes =
      (*module)->getAttrOfType<IntegerAttr>("dt.arena_bytes").getInt();
  std::vector<char> arena(arenaBytes + 64);
  char *base =
      arena.data() + (64 - reinterpret_cast<uintptr_t>(arena.data()) % 64) % 64;
  dt::interp::Interpreter interp(*reference);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  // (The reference's globals: lowering erases the module's own.)
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
      else if (g.getRole() == dt::Role::param || g.getRole() == dt::Role::input)
        v = static_cast<double>(static_cast<float>(normal(rng) * 0.5));
    }
    for (int64_t i = 0; i < value.numel(); ++i)
      writeElement(base + *g.getOffset() + i * bytesOf(t.getElementType()),
                   t.getElementType(), value.data[i]);
    interp.globals[g.getSymName().str()] = value;
  }

  // Lower and JIT.
  PassManager lower(&ctx);
  lower.addPass(dt::createConvertDTToKernels());
  dt::buildLowerToLLVMPipeline(lower);
  ASSERT_TRUE(succeeded(lower.run(*module)));
  ExecutionEngineOptions options;
  options.transformer = makeOptimizingTransformer(3, 0, nullptr);
  auto engine = ExecutionEngine::create(*module, options);
  ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());
  (*engine)->registerSymbols(kernelSymbols);

  auto step = [&](StringRef entry) {
    auto fn = (*engine)->lookup(("dt_" + entry).str());
    ASSERT_TRUE(bool(fn)) << llvm::toString(fn.takeError());
    reinterpret_cast<void (*)(char *)> (*fn)(base);
    auto ref = reference->lookupSymbol<func::FuncOp>(entry);
    ASSERT_TRUE(succeeded(interp.call(ref, {})));
    for (dt::GlobalOp g : globals) {
      if (g.getRole() == dt::Role::input)
        continue;
      RankedTensorType t = g.getTensorType();
      const Tensor &expected = interp.globals[g.getSymName().str()];
      for (int64_t i = 0; i < expected.numel(); ++i) {
        double got =
            readElement(base + *g.getOffset() + i * bytesOf(t.getElementType()),
                        t.getElementType());
        double want = expected.data[i];
        ASSERT_NEAR(got, want, 1e-5 + 2e-3 * std::abs(want))
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
                         ::testing::Values(Program{"MLP", kMLP},
                                           Program{"Attention", kAttention}),
                         [](const ::testing::TestParamInfo<Program> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
