//===- DeployCheck.cpp - The deploy blocks --------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Each target accepts the keys LANGUAGE.md names (the platform's own names)
// plus the few its job request cannot do without, each with a type:
//   sagemaker  instance* ("ml.*"), count, spot, max_run, max_wait, role*
//              ("arn:*"), image*, checkpoint_uri ("s3://"), output_uri
//              ("s3://"), channels {name: uri}; extra: region, volume_size
//              (GB), environment {NAME: value}
//   vertex     machine*, accelerator, accelerator_count, replicas, spot,
//              image*, base_output_dir ("gs://"); extra: region, project,
//              service_account, environment
//   slurm      nodes*, gpus_per_node, partition, time ("HH:MM:SS",
//              "D-HH:MM:SS"); extra: account, qos, cpus_per_task, environment
//   kubernetes image*, namespace, replicas, gpus_per_replica, cpu, memory,
//              node_selector {label: value}, service_account, environment
// (* required); every target also takes price_per_hour (a positive number:
// the price of one instance, node or replica an hour, for `dtc --report`'s
// cost of the job). Durations are "24h", "90m", "3600s", "2d" or seconds.
// Cross-checks catch launches that cannot match the job: replicas times GPUs
// against the mesh's world size (slurm, vertex, kubernetes), SageMaker's
// max_wait below max_run or without spot.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

using namespace dt;
using namespace dt::sema;
using llvm::failure;
using llvm::success;

namespace {
enum class KeyType {
  String,
  PositiveInt,
  NonNegativeInt,
  Bool,
  Duration,  ///< "24h", "90m", "3600s", "2d" or seconds.
  SlurmTime, ///< "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM:SS".
  Strings,   ///< A record of strings.
  Quantity,  ///< A number or a string ("64Gi", "500m").
  PositiveNumber,
};

struct KeySpec {
  const char *name;
  KeyType type;
  bool required;
  const char *prefix; ///< A required string prefix, or null.
};

const KeySpec kSageMaker[] = {
    {"instance", KeyType::String, true, "ml."},
    {"count", KeyType::PositiveInt, false, nullptr},
    {"spot", KeyType::Bool, false, nullptr},
    {"max_run", KeyType::Duration, false, nullptr},
    {"max_wait", KeyType::Duration, false, nullptr},
    {"role", KeyType::String, true, "arn:"},
    {"image", KeyType::String, true, nullptr},
    {"checkpoint_uri", KeyType::String, false, "s3://"},
    {"output_uri", KeyType::String, false, "s3://"},
    {"channels", KeyType::Strings, false, nullptr},
    {"region", KeyType::String, false, nullptr},
    {"volume_size", KeyType::PositiveInt, false, nullptr},
    {"environment", KeyType::Strings, false, nullptr},
    {"price_per_hour", KeyType::PositiveNumber, false, nullptr},
};

const KeySpec kVertex[] = {
    {"machine", KeyType::String, true, nullptr},
    {"accelerator", KeyType::String, false, nullptr},
    {"accelerator_count", KeyType::PositiveInt, false, nullptr},
    {"replicas", KeyType::PositiveInt, false, nullptr},
    {"spot", KeyType::Bool, false, nullptr},
    {"image", KeyType::String, true, nullptr},
    {"base_output_dir", KeyType::String, false, "gs://"},
    {"region", KeyType::String, false, nullptr},
    {"project", KeyType::String, false, nullptr},
    {"service_account", KeyType::String, false, nullptr},
    {"environment", KeyType::Strings, false, nullptr},
    {"price_per_hour", KeyType::PositiveNumber, false, nullptr},
};

const KeySpec kSlurm[] = {
    {"nodes", KeyType::PositiveInt, true, nullptr},
    {"gpus_per_node", KeyType::NonNegativeInt, false, nullptr},
    {"partition", KeyType::String, false, nullptr},
    {"time", KeyType::SlurmTime, false, nullptr},
    {"account", KeyType::String, false, nullptr},
    {"qos", KeyType::String, false, nullptr},
    {"cpus_per_task", KeyType::PositiveInt, false, nullptr},
    {"environment", KeyType::Strings, false, nullptr},
    {"price_per_hour", KeyType::PositiveNumber, false, nullptr},
};

const KeySpec kKubernetes[] = {
    {"image", KeyType::String, true, nullptr},
    {"namespace", KeyType::String, false, nullptr},
    {"replicas", KeyType::PositiveInt, false, nullptr},
    {"gpus_per_replica", KeyType::NonNegativeInt, false, nullptr},
    {"cpu", KeyType::Quantity, false, nullptr},
    {"memory", KeyType::Quantity, false, nullptr},
    {"node_selector", KeyType::Strings, false, nullptr},
    {"service_account", KeyType::String, false, nullptr},
    {"environment", KeyType::Strings, false, nullptr},
    {"price_per_hour", KeyType::PositiveNumber, false, nullptr},
};

/// GPUs of SageMaker's GPU training instances (AWS's instance type pages).
/// One rank runs per GPU; other instances run world / count CPU ranks each.
const std::pair<const char *, int> kSageMakerGpus[] = {
    {"ml.p3.2xlarge", 1},     {"ml.p3.8xlarge", 4},    {"ml.p3.16xlarge", 8},
    {"ml.p3dn.24xlarge", 8},  {"ml.p4d.24xlarge", 8},  {"ml.p4de.24xlarge", 8},
    {"ml.p5.48xlarge", 8},    {"ml.p5e.48xlarge", 8},  {"ml.p5en.48xlarge", 8},
    {"ml.g4dn.xlarge", 1},    {"ml.g4dn.2xlarge", 1},  {"ml.g4dn.4xlarge", 1},
    {"ml.g4dn.8xlarge", 1},   {"ml.g4dn.16xlarge", 1}, {"ml.g4dn.12xlarge", 4},
    {"ml.g5.xlarge", 1},      {"ml.g5.2xlarge", 1},    {"ml.g5.4xlarge", 1},
    {"ml.g5.8xlarge", 1},     {"ml.g5.16xlarge", 1},   {"ml.g5.12xlarge", 4},
    {"ml.g5.24xlarge", 4},    {"ml.g5.48xlarge", 8},   {"ml.g6.xlarge", 1},
    {"ml.g6.2xlarge", 1},     {"ml.g6.4xlarge", 1},    {"ml.g6.8xlarge", 1},
    {"ml.g6.16xlarge", 1},    {"ml.g6.12xlarge", 4},   {"ml.g6.24xlarge", 4},
    {"ml.g6.48xlarge", 8},    {"ml.g6e.xlarge", 1},    {"ml.g6e.2xlarge", 1},
    {"ml.g6e.4xlarge", 1},    {"ml.g6e.8xlarge", 1},   {"ml.g6e.16xlarge", 1},
    {"ml.g6e.12xlarge", 4},   {"ml.g6e.24xlarge", 4},  {"ml.g6e.48xlarge", 8},
};

} // namespace

std::optional<int> sema::sageMakerGpus(llvm::StringRef instance) {
  for (auto [name, gpus] : kSageMakerGpus)
    if (instance == name)
      return gpus;
  // A GPU family (p, g) this table does not list: its GPU count is unknown.
  if (instance.starts_with("ml.p") || instance.starts_with("ml.g"))
    return std::nullopt;
  return 0;
}

namespace {

/// Whether `text` is a Slurm time limit.
bool isSlurmTime(llvm::StringRef text) {
  auto [days, rest] = text.contains('-')
                          ? text.split('-')
                          : std::make_pair(llvm::StringRef(), text);
  unsigned d;
  if (!days.empty() && days.getAsInteger(10, d))
    return false;
  llvm::SmallVector<llvm::StringRef, 3> parts;
  rest.split(parts, ':');
  if (parts.empty() || parts.size() > 3)
    return false;
  for (size_t i = 0; i < parts.size(); ++i) {
    unsigned v;
    if (parts[i].empty() || parts[i].getAsInteger(10, v) || (i > 0 && v >= 60))
      return false;
  }
  return true;
}
} // namespace

std::optional<int64_t> dt::parseDuration(llvm::StringRef text) {
  if (text.size() < 2)
    return std::nullopt;
  int64_t unit = llvm::StringSwitch<int64_t>(text.substr(text.size() - 1))
                     .Case("s", 1)
                     .Case("m", 60)
                     .Case("h", 3600)
                     .Case("d", 86400)
                     .Default(0);
  uint64_t n;
  if (!unit || text.drop_back().getAsInteger(10, n) || n == 0 || n > (1u << 30))
    return std::nullopt;
  return static_cast<int64_t>(n) * unit;
}

LogicalResult sema::checkDeploy(SemaContext &ctx, const ModuleScope &main,
                                const ast::DeployDecl &decl,
                                const ParallelConfig *parallel,
                                DeployConfig &config) {
  llvm::StringRef target = decl.getTarget();
  llvm::ArrayRef<KeySpec> specs =
      target == "sagemaker"    ? llvm::ArrayRef<KeySpec>(kSageMaker)
      : target == "vertex"     ? llvm::ArrayRef<KeySpec>(kVertex)
      : target == "slurm"      ? llvm::ArrayRef<KeySpec>(kSlurm)
      : target == "kubernetes" ? llvm::ArrayRef<KeySpec>(kKubernetes)
                               : llvm::ArrayRef<KeySpec>();
  if (specs.empty()) {
    ctx.error(
        decl.getTargetLoc(),
        "unknown deploy target '" + target +
            "'; expected sagemaker, vertex, slurm or kubernetes" +
            suggest(target, {"sagemaker", "vertex", "slurm", "kubernetes"}));
    return failure();
  }
  config.target = target.str();
  config.loc = ctx.diag.resolve(decl.getLoc());
  KeyEvaluator keys(ctx, main);
  std::vector<std::string> names;
  for (const KeySpec &spec : specs)
    names.push_back(spec.name);
  std::map<std::string, const ast::KeyValue *> seen;
  bool ok = true;
  for (const ast::KeyValue &kv : decl.getEntries()) {
    auto spec = llvm::find_if(
        specs, [&](const KeySpec &s) { return kv.key == s.name; });
    if (spec == specs.end()) {
      ctx.error(kv.keyLoc, "unknown " + target + " key '" + kv.key + "'" +
                               suggest(kv.key, names));
      ok = false;
      continue;
    }
    auto [it, inserted] = seen.try_emplace(kv.key, &kv);
    if (!inserted) {
      ctx.error(kv.keyLoc, "'" + kv.key + "' is given twice");
      ctx.note(it->second->keyLoc, "first given here");
      ok = false;
      continue;
    }
    FailureOr<Constant> value = keys.constant(*kv.value);
    if (failed(value)) {
      ok = false;
      continue;
    }
    std::string what = "'" + kv.key + "' of " + target.str();
    llvm::SMLoc at = kv.value->getLoc();
    auto bad = [&](const std::string &expected) {
      ctx.error(at, what + " must be " + expected + ", not " + value->str());
      ok = false;
    };
    switch (spec->type) {
    case KeyType::String:
      if (value->getKind() != Constant::Kind::String ||
          value->getString().empty())
        bad("a non-empty string");
      else if (spec->prefix && !value->getString().starts_with(spec->prefix))
        bad(std::string("a string starting with \"") + spec->prefix + "\"");
      break;
    case KeyType::PositiveInt:
    case KeyType::NonNegativeInt: {
      int64_t min = spec->type == KeyType::PositiveInt ? 1 : 0;
      if (!value->isInt() || value->getInt() < min)
        bad(min ? "a positive integer" : "a non-negative integer");
      break;
    }
    case KeyType::Bool:
      if (value->getKind() != Constant::Kind::Bool)
        bad("true or false");
      break;
    case KeyType::Duration:
      if (!(value->isInt() && value->getInt() > 0) &&
          !(value->getKind() == Constant::Kind::String &&
            parseDuration(value->getString())))
        bad("a duration such as \"24h\", \"90m\" or a number of seconds");
      break;
    case KeyType::SlurmTime:
      if (!(value->getKind() == Constant::Kind::String &&
            isSlurmTime(value->getString())))
        bad("a Slurm time limit such as \"24:00:00\" or \"1-12:00:00\"");
      break;
    case KeyType::Strings:
      if (value->getKind() != Constant::Kind::Record ||
          llvm::any_of(value->getItems(), [](const Constant &c) {
            return c.getKind() != Constant::Kind::String;
          }))
        bad("a record of strings such as {train: \"s3://bucket/data\"}");
      break;
    case KeyType::Quantity:
      if (!value->isNumber() && value->getKind() != Constant::Kind::String)
        bad("a number or a string such as \"64Gi\"");
      break;
    case KeyType::PositiveNumber:
      if (!value->isNumber() || !(value->getNumber() > 0))
        bad("a positive number (dollars an hour)");
      break;
    }
    config.keys.push_back({kv.key, *value});
  }
  for (const KeySpec &spec : specs) {
    if (spec.required && !seen.count(spec.name)) {
      ctx.error(decl.getTargetLoc(),
                "deploy " + target + " needs '" + spec.name + "'");
      ok = false;
    }
  }
  if (!ok)
    return failure();

  auto seconds = [&](llvm::StringRef key) -> std::optional<int64_t> {
    const Constant *c = config.get(key);
    if (!c)
      return std::nullopt;
    return c->isInt() ? std::optional<int64_t>(c->getInt())
                      : parseDuration(c->getString());
  };
  auto intKey = [&](llvm::StringRef key, int64_t dflt) {
    const Constant *c = config.get(key);
    return c ? c->getInt() : dflt;
  };
  if (target == "sagemaker" && config.get("max_wait")) {
    const Constant *spot = config.get("spot");
    if (!spot || !spot->getBool()) {
      ctx.error(seen["max_wait"]->keyLoc, "'max_wait' applies to spot "
                                          "training; set spot = true");
      return failure();
    }
    if (seconds("max_run") && *seconds("max_wait") < *seconds("max_run")) {
      ctx.error(seen["max_wait"]->value->getLoc(),
                "'max_wait' must be at least 'max_run' (SageMaker waits for "
                "spot capacity within it)");
      return failure();
    }
  }
  if (target == "vertex" && config.get("accelerator_count") &&
      !config.get("accelerator")) {
    ctx.error(seen["accelerator_count"]->keyLoc,
              "'accelerator_count' needs 'accelerator'");
    return failure();
  }
  // Launches whose rank count is known must match the mesh.
  int64_t world = parallel ? parallel->getWorldSize() : 1;
  std::optional<std::pair<int64_t, int64_t>> layout;
  const char *countKey = nullptr;
  if (target == "slurm" && intKey("gpus_per_node", 0) > 0) {
    layout = {intKey("nodes", 1), intKey("gpus_per_node", 0)};
    countKey = "nodes";
  } else if (target == "vertex" && config.get("accelerator_count")) {
    layout = {intKey("replicas", 1), intKey("accelerator_count", 1)};
    countKey = "accelerator_count";
  } else if (target == "kubernetes" && intKey("gpus_per_replica", 0) > 0) {
    layout = {intKey("replicas", 1), intKey("gpus_per_replica", 0)};
    countKey = "gpus_per_replica";
  }
  if (target == "sagemaker") {
    llvm::StringRef instance = config.get("instance")->getString();
    int64_t count = intKey("count", 1);
    std::optional<int> gpus = sageMakerGpus(instance);
    if (!gpus) {
      ctx.error(seen["instance"]->value->getLoc(),
                "dt does not know how many GPUs a SageMaker " + instance +
                    " has, so it cannot place the mesh's " +
                    std::to_string(world) +
                    " ranks on it; use a listed instance type (docs/"
                    "language.md, deploy)");
      return failure();
    }
    if (*gpus > 0) {
      layout = {count, *gpus};
      countKey = "count";
    } else if (world % count != 0) {
      auto it = seen.find("count");
      ctx.error(it != seen.end() ? it->second->value->getLoc()
                                 : decl.getTargetLoc(),
                "deploy sagemaker launches " + std::to_string(count) +
                    " instances, which cannot share the mesh's " +
                    std::to_string(world) +
                    " ranks evenly; choose a count that divides it");
      return failure();
    }
  }
  int64_t ranks = 0;
  if (layout && (llvm::MulOverflow(layout->first, layout->second, ranks) ||
                 ranks != world)) {
    auto it = seen.find(countKey);
    llvm::SMLoc at =
        it != seen.end() ? it->second->keyLoc : decl.getTargetLoc();
    ctx.error(
        at, "deploy " + target + " launches " + std::to_string(layout->first) +
                " x " + std::to_string(layout->second) +
                (ranks == layout->first * layout->second
                     ? " = " + std::to_string(ranks)
                     : std::string()) +
                " ranks, but the " +
                (!parallel || parallel->mesh.empty()
                     ? std::string("job runs on one rank")
                                        : "mesh has " + std::to_string(world)));
    return failure();
  }
  return success();
}
