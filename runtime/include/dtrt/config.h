//===- dtrt/config.h - The run's effective configuration -------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The manifest gives the program's defaults (its train block), the command
// line overrides them; RunConfig is the result, so the rest of the runtime
// never has to ask both. Resolution also rejects combinations that cannot
// work (a checkpoint interval without a checkpoint directory, --data for a
// synthetic source) before anything is loaded.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_CONFIG_H
#define DTRT_CONFIG_H

#include "dtrt/manifest.h"
#include "dtrt/options.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtrt {

/// The progress/record interval when neither the program nor --log-every
/// gives one.
inline constexpr int64_t kDefaultLogEvery = 10;
/// The steps --trace records without --trace-steps: five, after the first
/// (whose page faults and cold caches no later step repeats).
inline constexpr std::pair<int64_t, int64_t> kDefaultTraceSteps{2, 6};

/// Everything that decides how this run behaves.
struct RunConfig {
  /// Exactly one is set.
  std::optional<int64_t> steps, epochs;
  uint64_t seed = 0;
  /// Whether --seed was given (a resumed run checks it against the
  /// checkpoint's).
  bool seedGiven = false;
  int64_t evalEvery = 0;
  DataSpec trainData;
  std::optional<DataSpec> evalData;
  /// Empty: no metrics file.
  std::string logDir;
  /// Empty: no TensorBoard events (dtrt/tensorboard.h).
  std::string tensorboardDir;
  /// Empty: no trace (dtrt/trace.h). The steps it records, inclusive.
  std::string traceDir;
  std::pair<int64_t, int64_t> traceSteps = kDefaultTraceSteps;
  /// A verdict line every N steps (0: only at the end).
  int64_t verdictEvery = 0;
  /// --report-html FILE: no training, the log directory's report into FILE.
  std::string reportHtml;
  int64_t logEvery = kDefaultLogEvery;
  /// Empty: no checkpoints.
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  int64_t checkpointKeep = 0;
  ResumeMode resume = ResumeMode::None;
  std::string resumePath;
  int threads = 1;
  /// Whether --threads was given (ranks on one machine otherwise share its
  /// CPUs).
  bool threadsGiven = false;
  int64_t timeoutSeconds = kDefaultCollectiveTimeout;
  int64_t ioTimeoutSeconds = kDefaultIoTimeout;
  Backend backend = Backend::Cpu;
  /// What carries a sharded program's collectives on GPUs, and whether
  /// --collectives said so.
  CollectiveEngine collectives = CollectiveEngine::Auto;
  bool collectivesGiven = false;
  /// 0: none; else the step whose gradients get an inf (--inject-overflow).
  int64_t injectOverflowStep = 0;
  /// Pretrained weights a fresh run starts from (the program's `init`, or
  /// --init); empty: the declared initialisers alone.
  std::string initPath;
  std::vector<std::string> initIgnore;
  /// Where the run's end writes the model (--export); empty: nowhere.
  std::string exportDir;
  uint64_t exportShardBytes = 0;
  /// Export the LoRA adapters alone, as PEFT saves them, rather than the
  /// model with them merged.
  bool exportAdapters = false;
};

/// Applies the --data overrides of `role` ("train", "eval") to its source.
/// For idx, `NAME=PATH` names the images file and derives the labels file
/// (deriveLabelsPath) unless `NAME.labels=` is given too.
Status applyDataOverrides(DataSpec &spec, const std::string &role,
                          const std::vector<DataOverride> &overrides);

/// Merges the manifest's defaults with the command line.
Expected<RunConfig> resolveConfig(const Manifest &manifest,
                                  const Options &options);

} // namespace dtrt

#endif // DTRT_CONFIG_H
