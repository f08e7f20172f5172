//===- dtrt/eval.h - Evaluation over the eval source ------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Evaluation walks the eval source in order, in batches of the eval buffers'
// leading dimension, and calls dt_eval_step on each. The last partial batch
// is padded (rows past the end get label -1, which the loss and accuracy
// ignore) or dropped, as the program's `eval_partial` says. The reported loss
// is the mean over all valid labels: each batch's mean loss weighted by its
// number of valid labels. Accuracy is correct rows over valid labels (one
// label per sample for idx/synthetic, seq per sample for tokens).
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_EVAL_H
#define DTRT_EVAL_H

#include "dtrt/abi.h"
#include "dtrt/arena.h"
#include "dtrt/data/batch.h"
#include "dtrt/pipeline.h"

#include <optional>

namespace dtrt {

/// The result of one evaluation.
struct EvalResult {
  double loss = 0.0;
  /// Classifiers only.
  std::optional<double> accuracy;
  /// Samples evaluated (padding excluded).
  int64_t samples = 0;
  double seconds = 0.0;
};

/// Checks that the program's eval outputs exist (`out/eval_loss`, and
/// `out/eval_correct` for a classifier).
Status checkEvalOutputs(const Manifest &manifest);

/// Evaluates the current parameters on the whole eval source.
/// Evaluates the eval source batch by batch: with `pipeline`, through its
/// stages (the result is then this rank's view: only the last stage's ranks
/// hold the loss; shareEvalResult hands it to every rank).
Expected<EvalResult> evaluate(Arena &arena, const Program &program,
                              const DataSource &source, BatchStager &stager,
                              PipelineRunner *pipeline = nullptr);

/// Makes every rank's `r` the one the ranks of the pipeline's last stage
/// computed (a collective over all ranks).
Status shareEvalResult(EvalResult &r, Communicator &comm, bool holder);

} // namespace dtrt

#endif // DTRT_EVAL_H
