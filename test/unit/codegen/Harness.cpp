//===- Harness.cpp - compiled programs next to the interpreter in tests ---===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "Harness.h"

#include "dt/Conversion/Passes.h"
#include "dt/MLIRGen/MLIRGen.h"
#include "dt/Sema/Sema.h"
#include "dt/Transforms/Passes.h"
#include "dtk/kernels.h"
#include "dtrt/blas.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <sys/mman.h>

using namespace mlir;

// Kernels report data faults through the runtime; in these tests a fault is a
// bug.
extern "C" void dtk_fail(const char *message) {
  fprintf(stderr, "kernel fault: %s\n", message);
  std::abort();
}

namespace dt::test {

const char *const kGptModel = R"(
import nn
model GPT(vocab: int, ctx: int, width: int, depth: int, heads: int) {
  wte    = nn.Embedding(vocab, width)
  wpe    = nn.Embedding(ctx, width)
  blocks = nn.Block(width, heads) * depth
  ln_f   = nn.LayerNorm(width)
  forward(tokens: i32[B, T]) -> f32[B, T, vocab] {
    h = wte(tokens) + wpe(iota(T))
    h = blocks(h)
    return ln_f(h) @ transpose(wte.weight)
  }
}
)";

void loadPipelineDialects(MLIRContext &ctx) {
  ctx.loadDialect<DTDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect, linalg::LinalgDialect,
                  memref::MemRefDialect, scf::SCFDialect, LLVM::LLVMDialect,
                  vector::VectorDialect>();
  registerBuiltinDialectTranslation(ctx);
  registerLLVMDialectTranslation(ctx);
}

LogicalResult planModule(ModuleOp module, bool gpu) {
  PassManager pm(module.getContext());
  buildTrainStepPipeline(pm);
  buildFuseAndPlanPipeline(pm, gpu);
  return pm.run(module);
}

OwningOpRef<ModuleOp> planProgram(MLIRContext &ctx, llvm::StringRef source,
                                  std::string &messages, bool gpu) {
  llvm::SourceMgr sourceMgr;
  llvm::raw_string_ostream os(messages);
  DiagnosticEngine diag(sourceMgr, os);
  ModuleLoader loader(diag, SearchPaths{DT_STDLIB_DIR, {}});
  const LoadedModule *main = loader.loadBuffer("test.dt", source);
  if (!main)
    return nullptr;
  FailureOr<std::unique_ptr<Program>> program = analyze(loader, *main);
  if (failed(program) || !(*program)->getJob())
    return nullptr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &ctx, os);
  OwningOpRef<ModuleOp> module = mlirGen(ctx, *(*program)->getJob(), "test.dt");
  if (!module || failed(planModule(*module, gpu)))
    return nullptr;
  return module;
}

//===----------------------------------------------------------------------===//
// CompiledProgram
//===----------------------------------------------------------------------===//

#ifdef DT_HAVE_BUILTINS
// compiler-rt's f32 -> bf16 rounding, which LLVM calls where the CPU has no
// instruction for it (no AVX512-BF16). Declared only to take its address.
extern "C" void __truncsfbf2();
#endif

namespace {

llvm::orc::SymbolMap kernelSymbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap map;
  auto add = [&](const char *name, void *fn) {
    map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn),
                           llvm::JITSymbolFlags::Exported};
  };
  add("dtk_matmul_f32", (void *)&dtk_matmul_f32);
  add("dtk_matmul_bias_f32", (void *)&dtk_matmul_bias_f32);
  add("dtk_softmax_f32", (void *)&dtk_softmax_f32);
  add("dtk_layer_norm_f32", (void *)&dtk_layer_norm_f32);
  add("dtk_layer_norm_grad_f32", (void *)&dtk_layer_norm_grad_f32);
  add("dtk_rms_norm_f32", (void *)&dtk_rms_norm_f32);
  add("dtk_rope_f32", (void *)&dtk_rope_f32);
  add("dtk_dropout_f32", (void *)&dtk_dropout_f32);
  add("dtk_conv2d_f32", (void *)&dtk_conv2d_f32);
  add("dtk_max_pool2d_f32", (void *)&dtk_max_pool2d_f32);
  add("dtk_max_pool2d_grad_f32", (void *)&dtk_max_pool2d_grad_f32);
  add("dtk_avg_pool2d_f32", (void *)&dtk_avg_pool2d_f32);
  add("dtk_avg_pool2d_grad_f32", (void *)&dtk_avg_pool2d_grad_f32);
  add("dtk_conv2d_input_grad_f32", (void *)&dtk_conv2d_input_grad_f32);
  add("dtk_conv2d_weight_grad_f32", (void *)&dtk_conv2d_weight_grad_f32);
  add("dtk_rms_norm_grad_f32", (void *)&dtk_rms_norm_grad_f32);
  add("dtk_embedding_f32", (void *)&dtk_embedding_f32);
  add("dtk_embedding_grad_f32", (void *)&dtk_embedding_grad_f32);
  add("dtk_cross_entropy_f32", (void *)&dtk_cross_entropy_f32);
  add("dtk_cross_entropy_grad_f32", (void *)&dtk_cross_entropy_grad_f32);
  add("dtk_count_correct_f32", (void *)&dtk_count_correct_f32);
  add("dtk_attention_f32", (void *)&dtk_attention_f32);
  add("dtk_attention_grad_f32", (void *)&dtk_attention_grad_f32);
  add("dtk_parallel_for", (void *)&dtk_parallel_for);
#ifdef DT_HAVE_BUILTINS
  add("__truncsfbf2", (void *)&__truncsfbf2);
#endif
  return map;
}

} // namespace

std::unique_ptr<CompiledProgram> CompiledProgram::compile(ModuleOp planned,
                                                          std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  MLIRContext *ctx = planned.getContext();
  OwningOpRef<ModuleOp> module = planned.clone();
  std::unique_ptr<CompiledProgram> p(new CompiledProgram);
  p->arenaBytes_ =
      (*module)->getAttrOfType<IntegerAttr>("dt.arena_bytes").getInt();

  llvm::raw_string_ostream os(error);
  ScopedDiagnosticHandler capture(ctx, [&](Diagnostic &d) {
    os << d.getLocation() << ": " << d << "\n";
    return success();
  });
  PassManager lower(ctx);
  buildLowerToKernelsPipeline(lower);
  buildLowerToLLVMPipeline(lower);
  if (failed(lower.run(*module)))
    return nullptr;

  ExecutionEngineOptions options;
  options.transformer = makeOptimizingTransformer(3, 0, nullptr);
  auto engine = ExecutionEngine::create(*module, options);
  if (!engine) {
    os << llvm::toString(engine.takeError());
    return nullptr;
  }
  (*engine)->registerSymbols(kernelSymbols);
  p->engine_ = std::move(*engine);

  void *memory = mmap(nullptr, size_t(p->arenaBytes_), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) {
    os << "cannot map an arena of " << p->arenaBytes_ << " bytes";
    return nullptr;
  }
  p->arena_ = static_cast<char *>(memory);
  return p;
}

CompiledProgram::~CompiledProgram() {
  if (arena_)
    munmap(arena_, size_t(arenaBytes_));
}

bool CompiledProgram::hasEntry(llvm::StringRef name) {
  auto fn = engine_->lookup(("dt_" + name).str());
  if (!fn) {
    llvm::consumeError(fn.takeError());
    return false;
  }
  return true;
}

void CompiledProgram::call(llvm::StringRef name) {
  auto fn = engine_->lookup(("dt_" + name).str());
  if (!fn) {
    fprintf(stderr, "no entry point dt_%s: %s\n", name.str().c_str(),
            llvm::toString(fn.takeError()).c_str());
    std::abort();
  }
  reinterpret_cast<void (*)(char *)>(*fn)(arena_);
}

//===----------------------------------------------------------------------===//
// Globals
//===----------------------------------------------------------------------===//

std::vector<double> readGlobal(const char *arena, GlobalOp g) {
  RankedTensorType t = g.getTensorType();
  Type elem = t.getElementType();
  const char *p = arena + *g.getOffset();
  std::vector<double> values(size_t(t.getNumElements()));
  for (size_t i = 0; i < values.size(); ++i) {
    if (elem.isF32()) {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      values[i] = f;
    } else if (elem.isInteger(32)) {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      values[i] = v;
    } else {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      values[i] = double(v);
    }
  }
  return values;
}

void writeGlobal(char *arena, GlobalOp g, llvm::ArrayRef<double> values) {
  Type elem = g.getTensorType().getElementType();
  char *p = arena + *g.getOffset();
  for (size_t i = 0; i < values.size(); ++i) {
    if (elem.isF32()) {
      float f = float(values[i]);
      std::memcpy(p + 4 * i, &f, 4);
    } else if (elem.isInteger(32)) {
      int32_t v = int32_t(values[i]);
      std::memcpy(p + 4 * i, &v, 4);
    } else {
      int64_t v = int64_t(values[i]);
      std::memcpy(p + 8 * i, &v, 8);
    }
  }
}

Difference compare(llvm::ArrayRef<double> got, llvm::ArrayRef<double> want,
                   double floor) {
  Difference d;
  double diff2 = 0, want2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double e = got[i] - want[i];
    d.maxRelative =
        std::max(d.maxRelative, std::abs(e) / (std::abs(want[i]) + floor));
    diff2 += e * e;
    want2 += want[i] * want[i];
  }
  d.normRelative = want2 > 0 ? std::sqrt(diff2 / want2) : std::sqrt(diff2);
  return d;
}

} // namespace dt::test

#ifndef DT_HARNESS_NO_MAIN
// The suite's main: OpenBLAS's kernels are chosen as emitted programs choose
// them (dtrt/blas.h), so that the oracle's and the kernels' products run at
// the machine's speed.
int main(int argc, char **argv) {
  dtrt::reexecWithBetterBlas(argv);
  // The interpreter allocates a fresh tensor per op, tens of MiB at the
  // widths tested here: keep freed memory in the heap rather than returning
  // it to the kernel and faulting it in again, op after op.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
#endif
