//===- Trace.cpp - Elaborating the loss into primitive ops ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// traceLoss runs the checked job's loss through the concrete evaluator with an
// Emitter, which forwards each parameter, input, constant and op to the
// GraphBuilder (parameters and inputs once each per trace).
//
//===----------------------------------------------------------------------===//

#include "dt/Sema/Trace.h"

#include "Checks.h"
#include "TensorOps.h"

using namespace dt;
using namespace dt::sema;

TraceValue Emitter::param(unsigned index) {
  auto [it, inserted] = params.try_emplace(index);
  if (inserted)
    it->second = builder.param(job.params[index]);
  return it->second;
}

TraceValue Emitter::input(DataRole role, llvm::StringRef field,
                          const TensorType &type) {
  std::string key = (toString(role) + "." + field).str();
  auto [it, inserted] = inputs.try_emplace(key);
  if (inserted)
    it->second = builder.input(role, field, type);
  return it->second;
}

TraceValue Emitter::constant(double value, DType dtype) {
  return builder.constant(value, dtype);
}

TraceValue Emitter::constant(int64_t value, DType dtype) {
  return builder.constant(value, dtype);
}

llvm::SmallVector<TraceValue, 1>
Emitter::op(PrimOp kind, llvm::ArrayRef<TraceValue> operands,
            const PrimAttrs &attrs, llvm::ArrayRef<TensorType> results,
            llvm::SMLoc loc, llvm::StringRef scope) {
  return builder.op(kind, operands, attrs, results, diag.resolve(loc), scope);
}

llvm::FailureOr<LossTrace> dt::traceLoss(const Job &job, DataRole role,
                                         int64_t batch, GraphBuilder &builder) {
  const TraceContext *trace = job.traceContext.get();
  if (!trace || !trace->root || !trace->loss || !trace->ctx)
    return llvm::failure();
  SemaContext &ctx = *trace->ctx;
  int index = static_cast<int>(role);
  if (role == DataRole::Eval && !trace->hasEval) {
    ctx.error(trace->loss->getLoc(), "the job has no eval source to trace");
    return llvm::failure();
  }
  if (batch < 1) {
    ctx.error(trace->loss->getLoc(),
              "a trace needs a positive batch, not " + std::to_string(batch));
    return llvm::failure();
  }

  Emitter emitter(builder, job, ctx.diag);
  Evaluator ev(ctx, Evaluator::Mode::Concrete, &emitter);
  DataBinding binding = trace->data[index];
  binding.batch = SymExpr(batch);
  ev.dataBindings[index] = &binding;

  Frame frame;
  frame.module = trace->main;
  frame.tensorContext = true;
  EvalValue model;
  model.kind = EvalValue::Kind::Instance;
  model.instance = trace->root.get();
  frame.locals["model"] = model;
  EvalValue data;
  data.kind = EvalValue::Kind::Data;
  data.role = role;
  frame.locals["data"] = data;

  llvm::FailureOr<EvalValue> loss = ev.eval(*trace->loss, frame);
  if (failed(loss) || !loss->isTensor())
    return llvm::failure();
  LossTrace result;
  result.loss = loss->handle;
  if (job.classifier && ev.lastCrossEntropy) {
    TensorOps ops(ev, "");
    const auto &[logits, labels] = *ev.lastCrossEntropy;
    result.logits = logits.handle;
    result.labels = labels.handle;
    result.logitsType = ops.concreteType(logits.dtype, logits.shape);
    result.labelsType = ops.concreteType(labels.dtype, labels.shape);
  }
  return result;
}
