//===- Interpreter.h - reference evaluator for dt IR ------------*- C++ -*-===//
//
// Evaluates dt functions directly, in double precision, one op at a time. It is
// the oracle of the test suite: VJP rules are checked against finite
// differences of it, and fused or lowered programs against it. Each result is
// rounded to its element type (f32 results to float), so f32 programs are
// evaluated with f32 rounding and f64 programs exactly. Matrix products go
// through double-precision BLAS so that it keeps up with models of realistic
// width; everything else is plain loops.
//
//===----------------------------------------------------------------------===//

#ifndef DT_INTERPRETER_INTERPRETER_H
#define DT_INTERPRETER_INTERPRETER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace dt::interp {

/// A dense row-major tensor of doubles (integers are held exactly up to 2^53).
struct Tensor {
  llvm::SmallVector<int64_t> shape;
  std::vector<double> data;

  Tensor() = default;
  Tensor(llvm::ArrayRef<int64_t> shape, double fill = 0.0);
  Tensor(llvm::ArrayRef<int64_t> shape, std::vector<double> data);
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

/// Evaluates the functions of one module; `globals` holds the value of each
/// dt.global by symbol name, read by dt.load and written by dt.store (missing
/// globals read as zeros).
class Interpreter {
public:
  explicit Interpreter(mlir::ModuleOp module) : module(module) {}

  /// Runs `fn` on `args` and returns its results; emits an error at the failing
  /// op.
  mlir::FailureOr<std::vector<Tensor>> call(mlir::func::FuncOp fn,
                                            llvm::ArrayRef<Tensor> args);

  std::map<std::string, Tensor> globals;

  /// Called after each op of a function body is evaluated, with its operands'
  /// and its results' values (rounded to their types): what tests that check
  /// one op's lowering on its own (a GPU kernel against the interpreter) need.
  std::function<void(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                     llvm::ArrayRef<Tensor> results)>
      observer;

private:
  mlir::ModuleOp module;
};

} // namespace dt::interp

#endif // DT_INTERPRETER_INTERPRETER_H
