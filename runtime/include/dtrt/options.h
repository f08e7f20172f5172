//===- dtrt/options.h - Options of an emitted program -----------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The options every emitted program accepts (DESIGN.md, "The emitted
// program"; docs/operations.md). Parsing only records what the command line
// says; dtrt/config.h merges it with the manifest's defaults. Both `--opt
// value` and `--opt=value` are accepted.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_OPTIONS_H
#define DTRT_OPTIONS_H

#include "dtrt/device.h"
#include "dtrt/error.h"
#include "dtrt/manifest.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrt {

/// One `--data` option: `ROLE=VALUE` (key empty) or `ROLE.KEY=VALUE`.
struct DataOverride {
  std::string role;
  std::string key;
  std::string value;
};

/// What `--resume` asks for.
enum class ResumeMode { None, Auto, Path };

/// The command line, as given.
struct Options {
  bool help = false, version = false, printManifest = false;
  std::optional<int64_t> steps, epochs;
  std::vector<DataOverride> data;
  std::optional<std::string> logDir;
  std::optional<std::string> tensorboardDir;
  /// --trace DIR and --trace-steps A:B (dtrt/trace.h).
  std::optional<std::string> traceDir;
  std::optional<std::pair<int64_t, int64_t>> traceSteps;
  std::optional<int64_t> verdictEvery;
  /// --report-html FILE: render the log directory's run report and exit.
  std::optional<std::string> reportHtml;
  std::optional<int64_t> logEvery;
  std::optional<std::string> checkpointDir;
  std::optional<int64_t> checkpointEvery, checkpointKeep;
  ResumeMode resume = ResumeMode::None;
  std::string resumePath;
  std::optional<uint64_t> seed;
  std::optional<int64_t> threads;
  /// Seconds a collective may wait for the other ranks.
  std::optional<int64_t> timeout;
  /// Seconds the ranks may wait for each other around file I/O.
  std::optional<int64_t> ioTimeout;
  std::optional<Backend> backend;
  std::optional<CollectiveEngine> collectives;
  std::optional<int64_t> evalEvery;
  /// Fault injection for f16 programs: the step whose gradients are made to
  /// overflow.
  std::optional<int64_t> injectOverflow;
  /// Pretrained weights to start from (overrides the program's `init`).
  std::optional<std::string> init;
  /// Where to write the trained model as Hugging Face safetensors, and the
  /// byte limit of one file of it.
  std::optional<std::string> exportDir;
  std::optional<uint64_t> exportShardBytes;
  /// --export-adapters: export the LoRA adapters alone (PEFT's layout).
  bool exportAdapters = false;
};

/// How long a collective waits for the other ranks by default: long enough
/// for a rank that is writing a checkpoint, short enough not to leave a job
/// that lost a rank hanging.
inline constexpr int64_t kDefaultCollectiveTimeout = 60;
/// The limit of the waits around checkpoints, exports and pretrained weights
/// (--io-timeout): half an hour, for one rank writing tens of GB.
inline constexpr int64_t kDefaultIoTimeout = 1800;

/// Parses argv[1..argc). Errors are usage errors (exit code 2).
Expected<Options> parseOptions(int argc, const char *const *argv);

/// The --help text, with the program's name and the manifest's defaults.
std::string usageText(const std::string &programName, const Manifest &manifest);

} // namespace dtrt

#endif // DTRT_OPTIONS_H
