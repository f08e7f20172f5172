//===- EvalTest.cpp - Tests of evaluation over the eval source ------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A fake dt_eval_step reports, per batch, its number of valid labels as the
// loss and the number of label-0 rows as correct; the runtime's totals must
// then be the label-weighted mean and correct / labels, with the last
// partial batch padded (labels -1) or dropped as the manifest says.
//
//===----------------------------------------------------------------------===//

#include "dtrt/eval.h"

#include "TestUtil.h"

using namespace dtrt;
using namespace dtrt::test;

namespace {

const BufferDesc *gEvalY, *gEvalLoss, *gEvalCorrect;

void fakeEvalStep(char *arena) {
  const int32_t *y = reinterpret_cast<int32_t *>(arena + gEvalY->offset);
  int valid = 0, zeros = 0;
  for (int64_t r = 0; r < gEvalY->elements; ++r) {
    EXPECT_GE(y[r], -1);
    valid += y[r] >= 0;
    zeros += y[r] == 0;
  }
  *reinterpret_cast<float *>(arena + gEvalLoss->offset) = float(valid);
  *reinterpret_cast<int32_t *>(arena + gEvalCorrect->offset) = zeros;
}

nlohmann::json evalManifest(const char *partial) {
  nlohmann::json j = baseManifest();
  auto add = [&](const char *name, const char *role, const char *dtype,
                 nlohmann::json shape, int offset) {
    j["buffers"].push_back({{"name", name},
                            {"role", role},
                            {"dtype", dtype},
                            {"shape", shape},
                            {"offset", offset}});
  };
  add("in/eval.x", "input", "f32", {4, 3}, 512);
  add("in/eval.y", "input", "i32", {4}, 576);
  add("out/eval_loss", "output", "f32", nlohmann::json::array(), 640);
  add("out/eval_correct", "output", "i32", nlohmann::json::array(), 704);
  j["arena"]["bytes"] = 768;
  j["train"]["eval_partial"] = partial;
  // 10 samples, labels i mod 4: batches of 4, 4 and 2 (+ 2 padding rows).
  j["data"]["eval"] = j["data"]["train"];
  return j;
}

EvalResult runEval(const char *partial) {
  Manifest m = mustParse(evalManifest(partial));
  gEvalY = m.find("in/eval.y");
  gEvalLoss = m.find("out/eval_loss");
  gEvalCorrect = m.find("out/eval_correct");
  EXPECT_TRUE(bool(checkEvalOutputs(m)));
  auto device = std::move(*openDevice(Backend::Cpu, Launch{}));
  Arena arena = std::move(*Arena::create(*device, m));
  auto source = std::move(*openDataSource(*m.evalData, "eval"));
  BatchStager stager = std::move(*BatchStager::create(*source, m, "eval", 0));
  Program program;
  program.evalStep = fakeEvalStep;
  Expected<EvalResult> r = evaluate(arena, program, *source, stager);
  EXPECT_TRUE(bool(r)) << r.error().message();
  return *r;
}

} // namespace

TEST(Eval, PadsAndWeightsByValidLabels) {
  EvalResult r = runEval("pad");
  EXPECT_EQ(r.samples, 10);
  // Per-batch means 4, 4, 2 weighted by 4, 4, 2 labels.
  EXPECT_DOUBLE_EQ(r.loss, (16.0 + 16.0 + 4.0) / 10.0);
  // Labels 0 at samples 0, 4, 8.
  ASSERT_TRUE(r.accuracy.has_value());
  EXPECT_DOUBLE_EQ(*r.accuracy, 3.0 / 10.0);
}

TEST(Eval, DropsThePartialBatch) {
  EvalResult r = runEval("drop");
  EXPECT_EQ(r.samples, 8);
  EXPECT_DOUBLE_EQ(r.loss, 4.0);
  EXPECT_DOUBLE_EQ(*r.accuracy, 2.0 / 8.0);
}

TEST(Eval, RequiresItsOutputs) {
  nlohmann::json j = evalManifest("pad");
  j["buffers"].erase(j["buffers"].size() - 1); // out/eval_correct
  Manifest m = mustParse(j);
  Status s = checkEvalOutputs(m);
  ASSERT_FALSE(bool(s));
  EXPECT_NE(s.error().message().find("no out/eval_correct"), std::string::npos);
}
