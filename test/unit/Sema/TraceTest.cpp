//===- TraceTest.cpp - Tests of traceLoss and the recorder ----------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The tracer's contract with MLIRGen: one call per parameter and input, ops
// whose operands already have the shapes they need, the batch the caller asks
// for, classifier outputs; and the recorder's own verification.
//
//===----------------------------------------------------------------------===//

#include "Compile.h"

#include "dt/Sema/TraceRecorder.h"

#include "gtest/gtest.h"

using namespace dt;
using namespace dt::test;

namespace {
std::string joined(llvm::ArrayRef<std::string> lines) {
  std::string text;
  for (const std::string &line : lines)
    text += line + "\n";
  return text;
}

TEST(Trace, MlpClassifier) {
  Compiled c(kMlpFashion);
  ASSERT_TRUE(c.program) << c.messages;
  TraceRecorder recorder;
  llvm::FailureOr<LossTrace> trace =
      traceLoss(c.job(), DataRole::Train, 128, recorder);
  ASSERT_TRUE(succeeded(trace)) << c.messages;
  EXPECT_TRUE(recorder.getViolations().empty())
      << joined(recorder.getViolations());
  EXPECT_EQ(recorder.getNumParams(), 4u);
  EXPECT_EQ(recorder.count(PrimOp::MatMul), 2u);
  EXPECT_EQ(recorder.count(PrimOp::BroadcastTo), 2u); // the two biases
  EXPECT_EQ(recorder.count(PrimOp::CrossEntropy), 1u);
  ASSERT_TRUE(trace->logits.isValid());
  ASSERT_TRUE(trace->labels.isValid());
  EXPECT_EQ(trace->logitsType.shape, (llvm::SmallVector<int64_t, 4>{128, 10}));
  EXPECT_EQ(trace->labelsType.dtype, DType::I32);
  EXPECT_EQ(recorder.getType(trace->loss).getRank(), 0u);
}

TEST(Trace, BatchAndRoleAreTheCallers) {
  Compiled c(kMlpFashion);
  ASSERT_TRUE(c.program) << c.messages;
  TraceRecorder recorder;
  ASSERT_TRUE(succeeded(traceLoss(c.job(), DataRole::Eval, 7, recorder)));
  EXPECT_EQ(recorder.getLines()[0], "%0 = input eval.x : f32[7, 784]");
  EXPECT_TRUE(recorder.getViolations().empty())
      << joined(recorder.getViolations());
  // The same Job traces again, independently.
  TraceRecorder again;
  ASSERT_TRUE(succeeded(traceLoss(c.job(), DataRole::Train, 3, again)));
  EXPECT_EQ(again.getLines()[0], "%0 = input train.x : f32[3, 784]");
}

TEST(Trace, InvalidRequestsFail) {
  Compiled c(
      gptProgram("batch = 8\n steps = 1\n optimizer = SGD(lr = 0.1)\n", ""));
  ASSERT_TRUE(c.program) << c.messages;
  TraceRecorder recorder;
  EXPECT_TRUE(failed(traceLoss(c.job(), DataRole::Train, 0, recorder)));
  EXPECT_NE(c.messages.find("a trace needs a positive batch"),
            std::string::npos);
}

TEST(Trace, NoEvalSource) {
  Compiled c(R"(
import nn
model M() {
  fc = nn.Linear(8, 2)
  forward(x: f32[B, 8]) -> f32[B, 2] { return fc(x) }
}
train {
  model = M()
  data = nn.synthetic(features = 8, classes = 2, count = 16)
  loss = mse(model(data.x), model(data.x) * 0.5)
  batch = 4
  steps = 1
  optimizer = SGD(lr = 0.1)
}
)");
  ASSERT_TRUE(c.program) << c.messages;
  EXPECT_FALSE(c.job().classifier);
  TraceRecorder recorder;
  EXPECT_TRUE(failed(traceLoss(c.job(), DataRole::Eval, 4, recorder)));
  TraceRecorder train;
  llvm::FailureOr<LossTrace> trace =
      traceLoss(c.job(), DataRole::Train, 4, train);
  ASSERT_TRUE(succeeded(trace));
  EXPECT_FALSE(trace->logits.isValid());
  // Each parameter is requested once although the model is called twice.
  EXPECT_EQ(train.getNumParams(), 2u);
  EXPECT_EQ(train.count(PrimOp::MatMul), 2u);
}

TEST(Trace, GptInlinesEveryLayer) {
  Compiled c(gptProgram("batch = 16\n micro_batch = 4\n steps = 1\n"
                        "optimizer = AdamW(lr = 1e-3)\n",
                        "mesh = (dp = 2)\n data = dp\n"));
  ASSERT_TRUE(c.program) << c.messages;
  const Job &job = c.job();
  TraceRecorder recorder;
  ASSERT_TRUE(
      succeeded(traceLoss(job, DataRole::Train, job.microBatch * 2, recorder)));
  EXPECT_TRUE(recorder.getViolations().empty())
      << joined(recorder.getViolations());
  // Every parameter is used, the tied embedding once.
  EXPECT_EQ(recorder.getNumParams(), job.params.size());
  EXPECT_EQ(recorder.count(PrimOp::Attention), 4u);
  EXPECT_EQ(recorder.count(PrimOp::Split), 4u);
  EXPECT_EQ(recorder.count(PrimOp::LayerNorm), 9u);
  EXPECT_EQ(recorder.count(PrimOp::Iota), 1u);
  EXPECT_EQ(recorder.getLines()[0], "%0 = input train.x : i32[8, 128]");
  // Ops carry the scope of the layer whose forward emitted them.
  bool sawAttentionScope = false;
  for (const std::string &line : recorder.getLines())
    sawAttentionScope |=
        line.find("attention(") != std::string::npos &&
        line.find("scope \"blocks.2.attn\"") != std::string::npos;
  EXPECT_TRUE(sawAttentionScope);
}

/// A builder that checks locations and scopes MLIRGen receives.
class LocationRecorder : public TraceRecorder {
public:
  llvm::SmallVector<TraceValue, 1>
  op(PrimOp kind, llvm::ArrayRef<TraceValue> operands, const PrimAttrs &attrs,
     llvm::ArrayRef<TensorType> resultTypes, const Location &loc,
     llvm::StringRef scope) override {
    files.push_back(loc.file);
    scopes.push_back(scope.str());
    return TraceRecorder::op(kind, operands, attrs, resultTypes, loc, scope);
  }
  std::vector<std::string> files, scopes;
};

TEST(Trace, LocationsNameTheFile) {
  Compiled c(kMlpFashion);
  ASSERT_TRUE(c.program) << c.messages;
  LocationRecorder recorder;
  ASSERT_TRUE(succeeded(traceLoss(c.job(), DataRole::Train, 2, recorder)));
  ASSERT_FALSE(recorder.files.empty());
  // The Linear layers' ops come from nn.dt, the relu and the loss from test.dt.
  EXPECT_NE(recorder.files.front().find("nn.dt"), std::string::npos);
  EXPECT_EQ(recorder.files.back(), "test.dt");
  EXPECT_EQ(recorder.scopes.front(), "fc1");
  EXPECT_EQ(recorder.scopes.back(), "");
}

TEST(TraceRecorder, FindsContractViolations) {
  TraceRecorder recorder;
  TensorType a{DType::F32, {2, 3}}, b{DType::F32, {4, 5}};
  TraceValue x = recorder.input(DataRole::Train, "x", a);
  TraceValue y = recorder.input(DataRole::Train, "y", b);
  recorder.op(PrimOp::MatMul, {x, y}, {}, {TensorType{DType::F32, {2, 5}}}, {},
              "");
  PrimAttrs perm;
  perm.perm = {0, 0};
  recorder.op(PrimOp::Transpose, {x}, perm, {a}, {}, "");
  recorder.op(PrimOp::Add, {x, x}, {}, {a}, {}, "");
  ASSERT_EQ(recorder.getViolations().size(), 2u);
  EXPECT_NE(recorder.getViolations()[0].find("inner dims differ"),
            std::string::npos);
  EXPECT_NE(recorder.getViolations()[1].find("not a permutation"),
            std::string::npos);
}
} // namespace
