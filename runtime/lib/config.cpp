//===- config.cpp - The run's effective configuration ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Command-line values win over the manifest's; see docs/operations.md for the
// table of options and their defaults.
//
//===----------------------------------------------------------------------===//

#include "dtrt/config.h"

#include "dtrt/pretrained.h"

#include "dtrt/data/idx.h"

#include <fmt/format.h>

namespace dtrt {

Status applyDataOverrides(DataSpec &spec, const std::string &role,
                          const std::vector<DataOverride> &overrides) {
  // The last value of each key wins; "NAME=PATH" is key "".
  std::optional<std::string> whole, images, labels, path;
  std::string firstOption;
  for (const DataOverride &o : overrides) {
    if (o.role != role)
      continue;
    if (firstOption.empty())
      firstOption = fmt::format("--data {}{}={}", o.role,
                                o.key.empty() ? "" : "." + o.key, o.value);
    (o.key.empty()       ? whole
     : o.key == "images" ? images
     : o.key == "labels" ? labels
                         : path) = o.value;
  }
  if (firstOption.empty())
    return Status::ok();
  switch (spec.kind) {
  case DataKind::Idx:
    if (path)
      return Error(fmt::format("--data {}.path: the {} source is idx; its "
                               "keys are images and labels",
                               role, role),
                   kExitUsage);
    if (whole) {
      spec.images = *whole;
      if (!labels) {
        spec.labels = deriveLabelsPath(*whole);
        if (spec.labels.empty())
          return Error(fmt::format("--data {}={}: cannot derive the labels "
                                   "file from that name (it has no "
                                   "'-images-idx3-ubyte'); give both with "
                                   "--data {}.images=PATH --data "
                                   "{}.labels=PATH",
                                   role, *whole, role, role),
                       kExitUsage);
      }
    }
    spec.images = images.value_or(spec.images);
    spec.labels = labels.value_or(spec.labels);
    return Status::ok();
  case DataKind::Tokens:
  case DataKind::TokenClasses:
    if (images || labels)
      return Error(fmt::format("--data {}.{}: the {} source is {}; its "
                               "key is path",
                               role, images ? "images" : "labels", role,
                               spec.kind == DataKind::Tokens ? "tokens"
                                                             : "token_classes"),
                   kExitUsage);
    spec.path = path.value_or(whole.value_or(spec.path));
    return Status::ok();
  case DataKind::Synthetic:
    return Error(fmt::format("{}: the {} source is synthetic and reads no "
                             "file",
                             firstOption, role),
                 kExitUsage);
  }
  return Status::ok();
}

Expected<RunConfig> resolveConfig(const Manifest &m, const Options &o) {
  const TrainSpec &t = m.train;
  RunConfig c;
  if (o.steps || o.epochs) {
    c.steps = o.steps;
    c.epochs = o.epochs;
  } else {
    c.steps = t.steps;
    c.epochs = t.epochs;
  }
  c.seed = o.seed.value_or(t.seed);
  c.seedGiven = o.seed.has_value();
  c.evalEvery = o.evalEvery.value_or(t.evalEvery);

  c.trainData = *m.trainData;
  c.evalData = m.evalData;
  for (const DataOverride &d : o.data)
    if (d.role == "eval" && !c.evalData)
      return Error("--data eval: the program has no eval source (its train "
                   "block has no 'eval' key)",
                   kExitUsage);
  if (Status s = applyDataOverrides(c.trainData, "train", o.data); !s)
    return s.error();
  if (c.evalData)
    if (Status s = applyDataOverrides(*c.evalData, "eval", o.data); !s)
      return s.error();

  const std::optional<LogSpec> &log = t.log;
  c.logDir = o.logDir.value_or(log ? log->dir : "");
  // Vertex AI names the TensorBoard directory of a job in the environment.
  const char *vertexTensorboard = std::getenv("AIP_TENSORBOARD_LOG_DIR");
  c.tensorboardDir = o.tensorboardDir.value_or(
      vertexTensorboard ? vertexTensorboard : "");
  c.traceDir = o.traceDir.value_or("");
  c.verdictEvery = o.verdictEvery.value_or(0);
  c.reportHtml = o.reportHtml.value_or("");
  if (o.reportHtml && c.logDir.empty())
    return Error("--report-html renders a log directory's records, and this "
                 "program names none: add --log-dir DIR",
                 kExitUsage);
  c.traceSteps = o.traceSteps.value_or(kDefaultTraceSteps);
  if (o.traceSteps && !o.traceDir)
    return Error("--trace-steps chooses the steps of a trace: add --trace DIR",
                 kExitUsage);
  c.logEvery =
      o.logEvery.value_or(log && log->every ? log->every : kDefaultLogEvery);

  const std::optional<CheckpointSpec> &ck = t.checkpoint;
  c.checkpointDir = o.checkpointDir.value_or(ck ? ck->dir : "");
  c.checkpointEvery = o.checkpointEvery.value_or(ck ? ck->every : 0);
  c.checkpointKeep = o.checkpointKeep.value_or(ck ? ck->keep : 0);
  if (c.checkpointDir.empty() && (o.checkpointEvery || o.checkpointKeep))
    return Error("--checkpoint-every/--checkpoint-keep need a checkpoint "
                 "directory: add --checkpoint-dir DIR",
                 kExitUsage);

  c.resume = o.resume;
  c.resumePath = o.resumePath;
  if (c.resume == ResumeMode::Auto && c.checkpointDir.empty())
    return Error("--resume auto looks in the checkpoint directory, and this "
                 "run has none: add --checkpoint-dir DIR",
                 kExitUsage);

  c.threads = int(o.threads.value_or(availableCpus()));
  c.threadsGiven = o.threads.has_value();
  c.timeoutSeconds = o.timeout.value_or(kDefaultCollectiveTimeout);
  c.ioTimeoutSeconds = o.ioTimeout.value_or(kDefaultIoTimeout);
  c.backend = o.backend.value_or(Backend::Auto);
  c.collectives = o.collectives.value_or(CollectiveEngine::Auto);
  c.collectivesGiven = o.collectives.has_value();
  if (o.injectOverflow && !m.find("out/loss_scale"))
    return Error("--inject-overflow tests dynamic loss scaling, which this "
                 "program does not have (it comes with precision = f16)",
                 kExitUsage);
  c.injectOverflowStep = o.injectOverflow.value_or(0);

  if (m.pretrained) {
    c.initPath = m.pretrained->path;
    c.initIgnore = m.pretrained->ignore;
  }
  if (o.init)
    c.initPath = *o.init;
  c.initIgnore.insert(c.initIgnore.end(), m.checkpointSkip.begin(),
                      m.checkpointSkip.end());
  if (!c.initPath.empty() && m.checkpointNames.empty())
    return Error("--init: this program's manifest names no parameter for a "
                 "checkpoint; compile it again with this dtc",
                 kExitUsage);
  c.exportDir = o.exportDir.value_or("");
  c.exportShardBytes = o.exportShardBytes.value_or(kDefaultExportShardBytes);
  if (!c.exportDir.empty() && m.checkpointNames.empty())
    return Error("--export: this program's manifest names no parameter for a "
                 "checkpoint; compile it again with this dtc",
                 kExitUsage);
  c.exportAdapters = o.exportAdapters;
  if (c.exportAdapters && c.exportDir.empty())
    return Error("--export-adapters says what --export DIR writes; give "
                 "--export DIR too",
                 kExitUsage);
  if (c.exportAdapters && !m.adapters)
    return Error("--export-adapters: this program has no adapters (its "
                 "train block has no `adapters = nn.lora(...)`)",
                 kExitUsage);
  if (c.steps && *c.steps == 0 && c.exportDir.empty())
    return Error("--steps 0 trains nothing; it only makes sense with "
                 "--export DIR (to export the initial or resumed weights)",
                 kExitUsage);
  return c;
}

} // namespace dtrt
