//===- TraceRecorder.h - records and verifies a trace -----------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Records a trace as text and checks every op against the contracts in
// Trace.h (operand and result shapes, attributes). `dtc --emit=trace` prints
// it; the unit tests and the fuzzer use the verification to hold the tracer
// to the contract MLIRGen relies on.
//
//===----------------------------------------------------------------------===//

#ifndef DT_SEMA_TRACERECORDER_H
#define DT_SEMA_TRACERECORDER_H

#include "dt/Sema/Trace.h"

#include <string>
#include <vector>

namespace dt {

/// Records a trace, one line per value, and verifies the op contracts.
class TraceRecorder : public GraphBuilder {
public:
  TraceValue param(const ParamInfo &param) override;
  TraceValue input(DataRole role, llvm::StringRef field,
                   const TensorType &type) override;
  TraceValue constant(double value, DType dtype) override;
  TraceValue constant(int64_t value, DType dtype) override;
  llvm::SmallVector<TraceValue, 1>
  op(PrimOp kind, llvm::ArrayRef<TraceValue> operands, const PrimAttrs &attrs,
     llvm::ArrayRef<TensorType> resultTypes, const Location &loc,
     llvm::StringRef scope) override;

  /// The trace, one line per op.
  llvm::ArrayRef<std::string> getLines() const { return lines; }
  /// Contract violations found (empty when the trace is well formed).
  llvm::ArrayRef<std::string> getViolations() const { return violations; }
  /// The type of a recorded value.
  const TensorType &getType(TraceValue value) const;
  /// How many ops of `kind` were recorded.
  unsigned count(PrimOp kind) const;
  /// How often each parameter was requested (must be once).
  unsigned getNumParams() const { return numParams; }

  void print(llvm::raw_ostream &os) const;

private:
  TraceValue add(const TensorType &type);
  std::string verify(PrimOp kind, llvm::ArrayRef<TensorType> operands,
                     const PrimAttrs &attrs,
                     llvm::ArrayRef<TensorType> results) const;

  std::vector<TensorType> types;
  std::vector<std::string> lines;
  std::vector<std::string> violations;
  std::vector<PrimOp> kinds;
  std::vector<std::string> paramNames;
  unsigned numParams = 0;
};

} // namespace dt

#endif // DT_SEMA_TRACERECORDER_H
