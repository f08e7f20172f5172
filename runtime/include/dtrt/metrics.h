//===- dtrt/metrics.h - The metrics.jsonl file ------------------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Metrics are JSON lines in DIR/metrics.jsonl, one record per line, appended
// and flushed as they happen so that a dashboard tailing the file (or a
// killed run) sees every record written so far.
//
// The file always reads as one run. A fresh run starts it empty. A resumed
// run continues it: records for steps after the checkpoint's step, written by
// the run that was killed after its last checkpoint, are dropped (the resumed
// run writes them again, with the same values), and so is a torn last line;
// the kept records are rewritten atomically (temp file, fsync, rename) before
// appending resumes.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_METRICS_H
#define DTRT_METRICS_H

#include "dtrt/error.h"
#include "dtrt/file.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace dtrt {

/// The metrics.jsonl of one run.
class MetricsLog {
public:
  /// Opens DIR/FILE (creating DIR). With `resumeStep`, keeps the records of
  /// steps <= *resumeStep and appends after them; without, starts an empty
  /// file. The run's other record files (timing.jsonl) follow the same rule.
  static Expected<MetricsLog>
  open(const std::string &dir, std::optional<int64_t> resumeStep,
       const std::string &fileName = "metrics.jsonl");

  /// Appends one record (an object with at least "step") and flushes it.
  Status write(const nlohmann::ordered_json &record);
  /// Makes the records written so far durable (before a checkpoint, so that
  /// a checkpoint never outlives the records it follows).
  Status sync() { return file_.sync(); }
  const std::string &path() const { return file_.path(); }

private:
  explicit MetricsLog(OutputFile file) : file_(std::move(file)) {}
  OutputFile file_;
};

} // namespace dtrt

#endif // DTRT_METRICS_H
