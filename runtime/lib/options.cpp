//===- options.cpp - Command-line options of an emitted program -----------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// A small table-driven parser: one row per option gives its name and value
// name (metavar); usageText lists the same options with the manifest's
// defaults (OptionsTest checks that each one appears there). Values are
// checked here (integers in range, known --data roles and keys);
// whether a --data override applies to the source's kind is checked when the
// configuration is resolved, where the manifest is at hand.
//
//===----------------------------------------------------------------------===//

#include "dtrt/options.h"

#include "dtrt/abi.h"
#include "dtrt/config.h"

#include <charconv>
#include <fmt/format.h>
#include <sched.h>
#include <string_view>
#include <unistd.h>

namespace dtrt {

namespace {

enum class Opt {
  Steps,
  Epochs,
  Data,
  SeedOpt,
  EvalEvery,
  LogDir,
  TensorBoard,
  Trace,
  TraceSteps,
  VerdictEvery,
  ReportHtml,
  LogEvery,
  CheckpointDir,
  CheckpointEvery,
  CheckpointKeep,
  Resume,
  Threads,
  Timeout,
  IoTimeout,
  BackendOpt,
  Collectives,
  InjectOverflow,
  Init,
  Export,
  ExportShardSize,
  ExportAdapters,
  Help,
  Version,
  PrintManifest,
};

struct OptionRow {
  Opt id;
  const char *name;
  const char *metavar; // null: takes no value
};

const OptionRow kOptions[] = {
    {Opt::Steps, "steps", "N"},
    {Opt::Epochs, "epochs", "N"},
    {Opt::Data, "data", "NAME=PATH"},
    {Opt::SeedOpt, "seed", "N"},
    {Opt::EvalEvery, "eval-every", "N"},
    {Opt::LogDir, "log-dir", "DIR"},
    {Opt::TensorBoard, "tensorboard", "DIR"},
    {Opt::Trace, "trace", "DIR"},
    {Opt::TraceSteps, "trace-steps", "A:B"},
    {Opt::VerdictEvery, "verdict-every", "N"},
    {Opt::ReportHtml, "report-html", "FILE"},
    {Opt::LogEvery, "log-every", "N"},
    {Opt::CheckpointDir, "checkpoint-dir", "DIR"},
    {Opt::CheckpointEvery, "checkpoint-every", "N"},
    {Opt::CheckpointKeep, "checkpoint-keep", "K"},
    {Opt::Resume, "resume", "auto|DIR"},
    {Opt::Threads, "threads", "N"},
    {Opt::Timeout, "timeout", "SECONDS"},
    {Opt::IoTimeout, "io-timeout", "SECONDS"},
    {Opt::BackendOpt, "backend", "cpu|cuda|auto"},
    {Opt::Collectives, "collectives", "auto|nccl|host"},
    {Opt::InjectOverflow, "inject-overflow", "STEP"},
    {Opt::Init, "init", "PATH"},
    {Opt::Export, "export", "DIR"},
    {Opt::ExportShardSize, "export-shard-size", "SIZE"},
    {Opt::ExportAdapters, "export-adapters", nullptr},
    {Opt::Help, "help", nullptr},
    {Opt::Version, "version", nullptr},
    {Opt::PrintManifest, "print-manifest", nullptr},
};

Error usageError(const std::string &msg) {
  return Error(msg + " (see --help)", kExitUsage);
}

/// Parses a decimal integer >= `min`.
Expected<int64_t> parseCount(std::string_view option, std::string_view text,
                             int64_t min) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min)
    return usageError(
        fmt::format("--{} {}: expected an integer >= {}", option, text, min));
  return v;
}

/// "5GB", "500MB", "1000000": bytes, with Hugging Face's decimal units
/// (huggingface_hub's parse_size_to_int: KB, MB, GB, TB are powers of 10).
Expected<uint64_t> parseByteSize(std::string_view text) {
  uint64_t unit = 1;
  for (auto [suffix, scale] :
       {std::pair<std::string_view, uint64_t>{"TB", 1'000'000'000'000},
        {"GB", 1'000'000'000},
        {"MB", 1'000'000},
        {"KB", 1'000}})
    if (text.size() > suffix.size() &&
        text.substr(text.size() - suffix.size()) == suffix) {
      unit = scale;
      text.remove_suffix(suffix.size());
      break;
    }
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v == 0 ||
      v > UINT64_MAX / unit)
    return Error("expected a positive size in bytes, or with KB, MB, GB or TB");
  return v * unit;
}

Expected<DataOverride> parseData(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq + 1 == text.size())
    return usageError(fmt::format("--data {}: expected NAME=PATH or "
                                  "NAME.KEY=PATH",
                                  text));
  DataOverride d;
  std::string_view name = text.substr(0, eq);
  d.value = std::string(text.substr(eq + 1));
  size_t dot = name.find('.');
  d.role = std::string(name.substr(0, dot));
  if (dot != std::string_view::npos)
    d.key = std::string(name.substr(dot + 1));
  if (d.role != "train" && d.role != "eval")
    return usageError(fmt::format("--data {}: the source name is train or "
                                  "eval, not '{}'",
                                  text, d.role));
  if (dot != std::string_view::npos && d.key != "images" && d.key != "labels" &&
      d.key != "path")
    return usageError(fmt::format("--data {}: the key is images, labels or "
                                  "path, not '{}'",
                                  text, d.key));
  return d;
}

} // namespace

Expected<Options> parseOptions(int argc, const char *const *argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h")
      arg = "--help";
    if (arg.substr(0, 2) != "--" || arg.size() == 2)
      return usageError(fmt::format("unexpected argument '{}'", arg));
    std::string_view name = arg.substr(2), value;
    bool hasValue = false;
    if (size_t eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      hasValue = true;
    }
    const OptionRow *row = nullptr;
    for (const OptionRow &r : kOptions)
      if (name == r.name)
        row = &r;
    if (!row)
      return usageError(fmt::format("unknown option '--{}'", name));
    if (!row->metavar && hasValue)
      return usageError(fmt::format("--{} takes no value", name));
    if (row->metavar && !hasValue) {
      if (i + 1 >= argc)
        return usageError(
            fmt::format("--{} needs a value ({})", name, row->metavar));
      value = argv[++i];
    }

    auto count = [&](int64_t min, std::optional<int64_t> &into) -> Status {
      Expected<int64_t> v = parseCount(name, value, min);
      if (!v)
        return v.error();
      into = *v;
      return Status::ok();
    };
    Status s;
    switch (row->id) {
    case Opt::Steps:
      // 0 only exports (checked with the rest of the configuration).
      s = count(0, o.steps);
      break;
    case Opt::Epochs:
      s = count(1, o.epochs);
      break;
    case Opt::Data: {
      Expected<DataOverride> d = parseData(value);
      if (!d)
        return d.error();
      o.data.push_back(*d);
      break;
    }
    case Opt::SeedOpt: {
      uint64_t v = 0;
      auto [end, ec] =
          std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size())
        return usageError(
            fmt::format("--seed {}: expected a non-negative integer", value));
      o.seed = v;
      break;
    }
    case Opt::EvalEvery:
      s = count(0, o.evalEvery);
      break;
    case Opt::LogDir:
      o.logDir = std::string(value);
      break;
    case Opt::TensorBoard:
      o.tensorboardDir = std::string(value);
      break;
    case Opt::Trace:
      o.traceDir = std::string(value);
      break;
    case Opt::VerdictEvery:
      s = count(0, o.verdictEvery);
      break;
    case Opt::ReportHtml:
      o.reportHtml = std::string(value);
      break;
    case Opt::TraceSteps: {
      // A:B, steps numbered as the progress line numbers them (from 1).
      auto number = [](std::string_view text, int64_t &into) {
        auto [end, ec] =
            std::from_chars(text.data(), text.data() + text.size(), into);
        return ec == std::errc() && end == text.data() + text.size();
      };
      size_t colon = value.find(':');
      int64_t a = 0, b = 0;
      bool parsed = colon != std::string_view::npos &&
                    number(value.substr(0, colon), a) &&
                    number(value.substr(colon + 1), b) && a >= 1 && b >= a;
      if (!parsed)
        s = Error(fmt::format("--trace-steps expects A:B with 1 <= A <= B "
                              "(steps as the progress line numbers them), "
                              "got '{}'",
                              value),
                  kExitUsage);
      else
        o.traceSteps = {a, b};
      break;
    }
    case Opt::LogEvery:
      s = count(1, o.logEvery);
      break;
    case Opt::CheckpointDir:
      o.checkpointDir = std::string(value);
      break;
    case Opt::CheckpointEvery:
      s = count(0, o.checkpointEvery);
      break;
    case Opt::CheckpointKeep:
      s = count(0, o.checkpointKeep);
      break;
    case Opt::Resume:
      if (value.empty())
        return usageError("--resume needs 'auto' or a checkpoint directory");
      o.resume = value == "auto" ? ResumeMode::Auto : ResumeMode::Path;
      o.resumePath = value == "auto" ? "" : std::string(value);
      break;
    case Opt::Threads:
      s = count(1, o.threads);
      break;
    case Opt::Timeout:
      s = count(1, o.timeout);
      break;
    case Opt::IoTimeout:
      s = count(1, o.ioTimeout);
      break;
    case Opt::BackendOpt: {
      Expected<Backend> b = parseBackend(value);
      if (!b)
        return usageError(b.error().message());
      o.backend = *b;
      break;
    }
    case Opt::Collectives: {
      Expected<CollectiveEngine> e = parseCollectiveEngine(value);
      if (!e)
        return usageError(e.error().message());
      o.collectives = *e;
      break;
    }
    case Opt::InjectOverflow:
      s = count(1, o.injectOverflow);
      break;
    case Opt::Init:
      if (value.empty())
        return usageError("--init needs a safetensors file or directory");
      o.init = std::string(value);
      break;
    case Opt::Export:
      if (value.empty())
        return usageError("--export needs a directory");
      o.exportDir = std::string(value);
      break;
    case Opt::ExportShardSize: {
      Expected<uint64_t> bytes = parseByteSize(value);
      if (!bytes)
        return usageError(
            fmt::format("--export-shard-size {}: {}", value,
                        bytes.error().message()));
      o.exportShardBytes = *bytes;
      break;
    }
    case Opt::ExportAdapters:
      o.exportAdapters = true;
      break;
    case Opt::Help:
      o.help = true;
      break;
    case Opt::Version:
      o.version = true;
      break;
    case Opt::PrintManifest:
      o.printManifest = true;
      break;
    }
    if (!s)
      return s.error();
  }
  if (o.steps && o.epochs)
    return usageError("--steps and --epochs both set the training length; "
                      "give one");
  return o;
}

static std::string describeData(const std::optional<DataSpec> &d) {
  if (!d)
    return "none";
  switch (d->kind) {
  case DataKind::Idx:
    return fmt::format("idx {} + {}", d->images, d->labels);
  case DataKind::Tokens:
    return fmt::format("tokens {}", d->path);
  case DataKind::TokenClasses:
    return fmt::format("token classes {}", d->path);
  case DataKind::Synthetic:
    return fmt::format("synthetic, seed {}", d->seed);
  }
  return "";
}

std::string usageText(const std::string &prog, const Manifest &m) {
  const TrainSpec &t = m.train;
  std::string length =
      t.steps ? fmt::format("{} steps", *t.steps)
              : fmt::format("{} epoch{}", *t.epochs, *t.epochs == 1 ? "" : "s");
  auto orNone = [](const std::string &s) { return s.empty() ? "none" : s; };
  std::string logDir = t.log ? t.log->dir : "";
  int64_t logEvery = t.log && t.log->every ? t.log->every : kDefaultLogEvery;
  std::string ckDir = t.checkpoint ? t.checkpoint->dir : "";
  int64_t ckEvery = t.checkpoint ? t.checkpoint->every : 0;
  int64_t ckKeep = t.checkpoint ? t.checkpoint->keep : 0;

  std::string s;
  auto line = [&](const char *opt, const std::string &help) {
    s += fmt::format("  {:<24}{}\n", opt, help);
  };
  s += fmt::format("usage: {} [options]\n\n", prog);
  s += fmt::format("Trains '{}'{} (a dt program, ABI {}; runtime libdtrt "
                   "{}).\n\n",
                   m.name, m.source.empty() ? "" : " from " + m.source, m.abi,
                   kRuntimeVersion);
  s += "Training:\n";
  line("--steps N",
       fmt::format("optimizer steps to train (default: {})", length));
  line("--epochs N", "epochs over the train source (drops the last partial "
                     "batch)");
  line("--data NAME=PATH",
       "data file of source NAME (train, eval); for idx, the images file "
       "(labels");
  line("", "derived: -images-idx3-ubyte -> -labels-idx1-ubyte); for tokens, "
           "a glob");
  line("--data NAME.KEY=PATH", "one file: KEY is images, labels (idx) or "
                               "path (tokens)");
  line("", fmt::format("train: {}", describeData(m.trainData)));
  line("", fmt::format("eval: {}", describeData(m.evalData)));
  line("--seed N", fmt::format("initialisation and data-order seed "
                               "(default: {})",
                               t.seed));
  line("--eval-every N",
       fmt::format("evaluate every N steps, 0: only at the end (default: {})",
                   t.evalEvery));
  s += "Output:\n";
  line("--log-dir DIR",
       "write DIR/metrics.jsonl and DIR/timing.jsonl, and at the end");
  line("", fmt::format("DIR/report.html (default: {})", orNone(logDir)));
  line("--tensorboard DIR",
       "TensorBoard events: the job's scalars in DIR, each rank's timings in");
  line("", "DIR/rank_<r>/ (default: $AIP_TENSORBOARD_LOG_DIR, else none)");
  line("--trace DIR", "a Chrome/Perfetto trace per rank of the traced steps: "
                      "DIR/rank_<r>.pt.trace.json");
  line("--verdict-every N", "where the step's time goes, and why, every N "
                            "steps (default: 0, at the end only)");
  line("--report-html FILE", "write the run report of the log directory "
                             "(--log-dir) to FILE, and exit");
  line("--trace-steps A:B",
       fmt::format("the steps --trace records (default: {}:{})",
                   kDefaultTraceSteps.first, kDefaultTraceSteps.second));
  line("--log-every N", fmt::format("progress line and training record every "
                                    "N steps (default: {})",
                                    logEvery));
  s += "Checkpoints:\n";
  line("--checkpoint-dir DIR",
       fmt::format("write checkpoints to DIR/step_NNNNNNNN (default: {})",
                   orNone(ckDir)));
  line("--checkpoint-every N",
       fmt::format("checkpoint every N steps; 0: only at the end and on "
                   "SIGTERM/SIGINT (default: {})",
                   ckEvery));
  line("--checkpoint-keep K",
       fmt::format("keep the newest K checkpoints, 0: all (default: {})",
                   ckKeep));
  line("--resume auto|DIR", "continue from the newest checkpoint in the "
                            "checkpoint dir (a fresh");
  line("", "start if there is none), or from the checkpoint directory DIR");
  s += "Execution:\n";
  line("--threads N", fmt::format("threads of OpenBLAS and of the kernels "
                                  "(default: {}, the CPUs this "
                                  "process may use,",
                                  availableCpus()));
  line("", "shared by the ranks of a sharded program on this machine)");
  if (!m.mesh.names.empty()) {
    line("--timeout SECONDS",
         fmt::format("how long a rank waits in a collective for the others "
                     "before it"));
    line("", fmt::format("stops the job (default: {})",
                         kDefaultCollectiveTimeout));
    line("--io-timeout SECONDS",
         "how long the ranks wait for each other around checkpoints,");
    line("", fmt::format("exports and pretrained weights, which one rank may "
                         "read or write for minutes (default: {})",
                         kDefaultIoTimeout));
  }
  line("--backend cpu|cuda|auto",
       "where to train; auto: a GPU if this build and machine have one,");
  line("", "else the CPU (default: auto; the first line says which)");
  if (!m.mesh.names.empty()) {
    line("--collectives auto|nccl|host",
         "what carries the collectives between GPUs: NCCL, or OpenMPI");
    line("", "through host memory (slow; lets ranks share a GPU); auto: NCCL");
    line("", "where it loads on every rank (default: auto)");
  }
  if (m.find("out/loss_scale")) {
    line("--inject-overflow STEP",
         "make step STEP's gradients overflow (tests dynamic loss");
    line("", "scaling: the step is skipped and the loss scale halves)");
  }
  s += "Pretrained weights:\n";
  line("--init PATH",
       fmt::format("start a fresh run from a safetensors file or directory "
                   "(default: {})",
                   orNone(m.pretrained ? m.pretrained->path : "")));
  line("--export DIR", "at the end, write the model to DIR as Hugging Face "
                       "safetensors;");
  line("", "with --steps 0, the initial or --resume'd weights");
  line("--export-shard-size SIZE",
       "the most bytes in one file of the export, e.g. 5GB, 500MB "
       "(default: 5GB)");
  if (m.adapters) {
    line("", "(the adapters merged into the weights they adapt)");
    line("--export-adapters", "export the LoRA adapters alone, as PEFT "
                              "saves them");
  }
  s += "Information:\n";
  line("--help, -h", "this text");
  line("--version", "the program's and the runtime's versions");
  line("--print-manifest", "the program's manifest (arena plan, recipe, data) "
                           "as JSON");
  s += "\nExit codes: 0 done, 1 fault (message on stderr), 2 usage error, 130 "
       "stopped by SIGINT,\n143 stopped by SIGTERM (after writing a "
       "checkpoint when a checkpoint dir is set).\n";
  return s;
}

} // namespace dtrt
