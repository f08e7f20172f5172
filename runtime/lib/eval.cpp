//===- eval.cpp - Evaluation over the eval source -------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Sums are kept in double: an eval set of millions of labels would lose
// precision in f32 accumulation.
//
//===----------------------------------------------------------------------===//

#include "dtrt/eval.h"

#include "dtrt/collectives.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>

namespace dtrt {

Status checkEvalOutputs(const Manifest &m) {
  if (!m.find("out/eval_loss"))
    return Error("the program has an eval entry point but no out/eval_loss "
                 "buffer; this is a bug in dtc, please report it");
  if (m.train.classifier && !m.find("out/eval_correct"))
    return Error("the program is a classifier but has no out/eval_correct "
                 "buffer; this is a bug in dtc, please report it");
  return Status::ok();
}

Expected<EvalResult> evaluate(Arena &arena, const Program &program,
                              const DataSource &source, BatchStager &stager,
                              PipelineRunner *pipeline) {
  auto start = std::chrono::steady_clock::now();
  const Manifest &m = arena.manifest();
  const BufferDesc *lossBuf = m.find("out/eval_loss");
  const BufferDesc *correctBuf =
      m.train.classifier ? m.find("out/eval_correct") : nullptr;
  int64_t rows = stager.rows(), n = source.size();
  int64_t batches = m.train.evalPad ? (n + rows - 1) / rows : n / rows;
  if (batches == 0)
    return Error(fmt::format("the eval source has {} samples, fewer than one "
                             "eval batch of {}, and the program drops "
                             "partial eval batches: nothing to evaluate",
                             n, rows));
  std::vector<int64_t> indices(static_cast<size_t>(rows));
  double lossSum = 0, correct = 0;
  int64_t labels = 0, samples = 0;
  for (int64_t b = 0; b < batches; ++b) {
    int64_t first = b * rows, valid = std::min(rows, n - first);
    for (int64_t r = 0; r < valid; ++r)
      indices[size_t(r)] = first + r;
    stager.stage(arena, indices.data(), valid);
    if (pipeline) {
      if (Status st = pipeline->evalBatch(); !st)
        return st.error();
    } else {
      program.evalStep(arena.base());
      if (Status st = checkCollectivesDone("dt_eval_step"); !st)
        return st.error();
    }
    int64_t batchLabels = valid * stager.labelsPerSample();
    lossSum += arena.readScalar(*lossBuf) * double(batchLabels);
    if (correctBuf)
      correct += arena.readScalar(*correctBuf);
    labels += batchLabels;
    samples += valid;
  }
  EvalResult r;
  r.loss = lossSum / double(labels);
  if (correctBuf)
    r.accuracy = correct / double(labels);
  r.samples = samples;
  r.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return r;
}

Status shareEvalResult(EvalResult &r, Communicator &comm, bool holder) {
  constexpr int kFields = 4;
  int64_t mine[kFields] = {holder ? 1 : 0, 0, -1, r.samples};
  std::memcpy(&mine[1], &r.loss, sizeof r.loss);
  if (r.accuracy)
    std::memcpy(&mine[2], &*r.accuracy, sizeof(double));
  std::vector<int64_t> all(size_t(kFields * comm.worldSize()));
  if (Status st = comm.allGather(mine, all.data(), kFields, DType::I64,
                                 comm.mesh().allAxes(), "the eval results");
      !st)
    return st;
  for (int rank = 0; rank < comm.worldSize(); ++rank) {
    const int64_t *theirs = &all[size_t(kFields * rank)];
    if (!theirs[0])
      continue;
    std::memcpy(&r.loss, &theirs[1], sizeof r.loss);
    if (r.accuracy)
      std::memcpy(&*r.accuracy, &theirs[2], sizeof(double));
    r.samples = theirs[3];
    break;
  }
  return Status::ok();
}

} // namespace dtrt
