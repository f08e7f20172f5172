//===- Harness.h - compiled programs beside the interpreter -----*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The pieces the code generation tests share: the front end and the pipeline
// up to the memory plan on a .dt program given as text; the real lowering of a
// planned module (dt-verify-arena included), JIT-compiled with LLVM -O3 and run
// on an arena of its own; the reference interpreter on a copy of the same
// planned module; and the globals of both, read and written as doubles.
//
//===----------------------------------------------------------------------===//

#ifndef DT_TEST_UNIT_CODEGEN_HARNESS_H
#define DT_TEST_UNIT_CODEGEN_HARNESS_H

#include "dt/Dialect/DT/IR/DTOps.h"
#include "dt/Interpreter/Interpreter.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <string>
#include <vector>

namespace dt::test {

/// The contract's GPT (token and position embeddings, pre-LN blocks, tied
/// output embedding) after `import nn`: tests append a train block.
extern const char *const kGptModel;

/// A context with every dialect the pipeline goes through.
void loadPipelineDialects(mlir::MLIRContext &ctx);

/// Parses, checks and generates `source` (a .dt program, with the real
/// standard library), then runs autodiff, the optimizer, fusion and memory
/// planning, the plan with `gpu` as dtc's for a program with GPU code.
/// Null, with the diagnostics in `messages`, on failure.
mlir::OwningOpRef<mlir::ModuleOp> planProgram(mlir::MLIRContext &ctx,
                                              llvm::StringRef source,
                                              std::string &messages,
                                              bool gpu = false);

/// Runs the train-step and fuse-and-plan pipelines on a dt module.
mlir::LogicalResult planModule(mlir::ModuleOp module, bool gpu = false);

/// A planned module lowered, JIT-compiled and bound to an arena it owns (a
/// lazily zeroed mapping, so large plans cost only what a test touches).
class CompiledProgram {
public:
  /// Lowers a clone of `planned`; null, with the reason in `error`, when the
  /// pipeline (dt-verify-arena included) or the JIT fails.
  static std::unique_ptr<CompiledProgram> compile(mlir::ModuleOp planned,
                                                  std::string &error);
  ~CompiledProgram();

  char *arena() { return arena_; }
  int64_t arenaBytes() const { return arenaBytes_; }
  /// Runs entry point `name` (dt_<name>) on the arena.
  void call(llvm::StringRef name);
  bool hasEntry(llvm::StringRef name);

private:
  CompiledProgram() = default;
  std::unique_ptr<mlir::ExecutionEngine> engine_;
  char *arena_ = nullptr;
  int64_t arenaBytes_ = 0;
};

/// The value of global `g` in an arena, as doubles.
std::vector<double> readGlobal(const char *arena, GlobalOp g);
/// Stores `values` (rounded to g's element type) into an arena.
void writeGlobal(char *arena, GlobalOp g, llvm::ArrayRef<double> values);

/// The largest |got - want| / (|want| + floor) over two tensors, and the
/// relative difference of their L2 norms' difference: ||got - want|| / ||want||.
struct Difference {
  double maxRelative = 0, normRelative = 0;
};
Difference compare(llvm::ArrayRef<double> got, llvm::ArrayRef<double> want,
                   double floor);

} // namespace dt::test

#endif // DT_TEST_UNIT_CODEGEN_HARNESS_H
