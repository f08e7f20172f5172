//===- Package.cpp - Jobs packaged for SageMaker and Vertex AI ------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The package is plain files a person can read: a Dockerfile, a bash entry
// point, the job request and a README. The entry point is the only part that
// runs on the platform: it maps the platform's directories (SageMaker's
// /opt/ml, Vertex's AIP_* Cloud Storage URIs through the /gcs mount) to the
// program's options and starts the host's ranks; the program itself detects
// the platform and meets the other hosts' ranks (runtime/lib/launch.cpp).
//
// Both platforms' roots can be moved by variables (DT_SAGEMAKER_ROOT,
// DT_GCS_ROOT), so that the tests run the entry point under a simulated
// platform on one machine.
//
//===----------------------------------------------------------------------===//

#include "dt/Package/Package.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace dt;
using namespace dt::package;
using llvm::failure;
using llvm::success;

std::optional<Platform> package::parsePlatform(llvm::StringRef name) {
  if (name == "sagemaker")
    return Platform::SageMaker;
  if (name == "vertex")
    return Platform::Vertex;
  return std::nullopt;
}

llvm::StringRef package::platformName(Platform platform) {
  return platform == Platform::SageMaker ? "sagemaker" : "vertex";
}

namespace {

/// The official CUDA runtime image the package builds on: the toolkit dt's
/// GPU kernels are built with, on an Ubuntu whose Open MPI, OpenBLAS and fmt
/// have the sonames the program links (libmpi.so.40, libopenblas.so.0,
/// libfmt.so.9).
constexpr const char *kBaseImage = "nvidia/cuda:13.0.0-runtime-ubuntu24.04";

/// The deploy block for `platform`, or null.
const DeployConfig *findDeploy(const Job &job, Platform platform) {
  for (const DeployConfig &d : job.deploys)
    if (d.target == platformName(platform))
      return &d;
  return nullptr;
}

std::string str(const DeployConfig &d, llvm::StringRef key,
                llvm::StringRef fallback = "") {
  const Constant *c = d.get(key);
  return c ? c->getString().str() : fallback.str();
}
int64_t num(const DeployConfig &d, llvm::StringRef key, int64_t fallback) {
  const Constant *c = d.get(key);
  return c ? c->getInt() : fallback;
}
bool flag(const DeployConfig &d, llvm::StringRef key) {
  const Constant *c = d.get(key);
  return c && c->getBool();
}
std::optional<int64_t> seconds(const DeployConfig &d, llvm::StringRef key) {
  const Constant *c = d.get(key);
  if (!c)
    return std::nullopt;
  return c->isInt() ? std::optional<int64_t>(c->getInt())
                    : parseDuration(c->getString());
}
/// A record key's entries, in the order written.
std::vector<std::pair<std::string, std::string>>
record(const DeployConfig &d, llvm::StringRef key) {
  std::vector<std::pair<std::string, std::string>> out;
  if (const Constant *c = d.get(key))
    for (size_t i = 0; i < c->getItems().size(); ++i)
      out.push_back({c->getKeys()[i], c->getItems()[i].getString().str()});
  return out;
}

/// Hosts (instances, replicas) the request starts.
int64_t hostCount(const DeployConfig &d, Platform platform) {
  return platform == Platform::SageMaker ? num(d, "count", 1)
                                         : num(d, "replicas", 1);
}

/// The smaller host counts a restarted job can run on: the data-parallel
/// axis shrinks with the hosts, each rank keeps its micro-batch, and the
/// global batch stays (more micro-batches accumulate).
std::vector<int64_t> smallerHostCounts(const Job &job, int64_t hosts) {
  std::vector<int64_t> counts;
  const ParallelConfig &p = job.parallel;
  if (p.dataAxes.size() != 1 || p.pipeline)
    return counts;
  int64_t world = p.getWorldSize();
  int64_t dp = p.getDataParallelSize();
  int64_t others = world / dp;
  int64_t perHost = world / hosts;
  int64_t perRank = job.microBatch;
  for (int64_t h = hosts - 1; h >= 1; --h) {
    int64_t ranks = h * perHost;
    if (ranks % others != 0)
      continue;
    int64_t newDp = ranks / others;
    if (job.batch % (perRank * newDp) == 0)
      counts.push_back(h);
  }
  return counts;
}

/// One file a data source reads: its role (train, eval), the option key
/// (path, images, labels) and the path the program was compiled with.
struct DataFile {
  std::string role, key, path;
};

std::vector<DataFile> dataFiles(const Job &job) {
  std::vector<DataFile> files;
  auto add = [&](const char *role, const DataSource &source) {
    for (const NamedConstant &arg : source.args)
      if ((arg.name == "path" || arg.name == "images" ||
           arg.name == "labels") &&
          arg.value.getKind() == Constant::Kind::String)
        files.push_back({role, arg.name, arg.value.getString().str()});
  };
  add("train", job.data);
  if (job.eval)
    add("eval", *job.eval);
  return files;
}

/// The SageMaker channel that holds `file`: the channel named after its role,
/// else the train channel when the file lies beside the train data.
std::optional<std::string> channelFor(const DataFile &file,
                                      const std::vector<DataFile> &files,
                                      const DeployConfig &d) {
  std::map<std::string, std::string> channels;
  for (auto &[name, uri] : record(d, "channels"))
    channels[name] = uri;
  if (channels.count(file.role))
    return file.role;
  if (!channels.count("train"))
    return std::nullopt;
  llvm::StringRef dir = llvm::sys::path::parent_path(file.path);
  for (const DataFile &f : files)
    if (f.role == "train" && llvm::sys::path::parent_path(f.path) == dir)
      return std::string("train");
  return std::nullopt;
}

std::string plural(int64_t n, llvm::StringRef noun) {
  return std::to_string(n) + " " + noun.str() + (n == 1 ? "" : "s");
}

std::string shellQuote(llvm::StringRef text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string jsonText(llvm::json::Value value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", value) << "\n";
  return text;
}

/// A name both platforms accept: letters, digits and '-', at most 63.
std::string jobName(const Job &job) {
  std::string name;
  for (char c : job.name)
    name += llvm::isAlnum(c) ? c : '-';
  return name.substr(0, 63);
}

// --- The entry point --------------------------------------------------------

std::string entryPoint(const Job &job, Platform platform,
                       const DeployConfig &d, llvm::StringRef program) {
  int64_t world = job.parallel.getWorldSize();
  int64_t perHost = world / hostCount(d, platform);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "#!/usr/bin/env bash\n"
     << "# Generated by dtc --package " << platformName(platform) << " for job '"
     << job.name << "'.\n"
     << "# Starts this host's " << plural(perHost, "rank") << " of " << program
     << " (the mesh's " << world << " over "
     << plural(hostCount(d, platform), "host") << ") with the platform's\n"
     << "# directories as the program's options; the program detects the "
        "platform and meets\n"
     << "# the other hosts' ranks by itself. A SIGTERM (spot interruption, "
        "stop) reaches\n"
     << "# every rank, which checkpoint and stop; the restarted job resumes "
        "from the newest\n"
     << "# checkpoint. Arguments are passed on to the program.\n"
     << "set -euo pipefail\n"
     << "here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
     << "program=\"$here/" << program << "\"\n"
     << "ranks_per_host=" << perHost << "\n"
     << "args=()\n\n";
  std::vector<DataFile> files = dataFiles(job);
  if (platform == Platform::SageMaker) {
    os << "# SageMaker runs the image as `docker run IMAGE train`.\n"
       << "if [ \"${1:-}\" = train ]; then shift; fi\n"
       << "ml=${DT_SAGEMAKER_ROOT:-/opt/ml}\n"
       << "export SM_INPUT_CONFIG_DIR=\"$ml/input/config\"\n"
       << "checkpoints=\"$ml/checkpoints\"  # synced with CheckpointConfig's "
          "S3 URI\n"
       << "model=\"$ml/model\"              # uploaded as model.tar.gz\n"
       << "logs=\"$ml/output/data/run\"     # uploaded as output.tar.gz\n"
       << "hosts=$(jq '.hosts | length' "
          "\"$SM_INPUT_CONFIG_DIR/resourceconfig.json\")\n"
       << "# The first host uploads the model.\n"
       << "first_host=$(jq -r '.current_host == .hosts[0]' "
          "\"$SM_INPUT_CONFIG_DIR/resourceconfig.json\" 2>/dev/null || echo "
          "true)\n"
       << "args+=(--log-dir \"$logs\")\n";
    if (d.get("checkpoint_uri"))
      os << "# A restarted job (spot) continues from the newest checkpoint.\n"
         << "args+=(--checkpoint-dir \"$checkpoints\" --resume auto)\n";
    for (const DataFile &f : files)
      if (std::optional<std::string> channel = channelFor(f, files, d))
        os << "args+=(--data " << f.role << "." << f.key << "=\"$ml/input/data/"
           << *channel << "/\"" << shellQuote(llvm::sys::path::filename(f.path))
           << ")\n";
    os << "# Hyperparameters become options: {\"steps\": \"100\"} -> --steps "
          "100.\n"
       << "hyper=\"$ml/input/config/hyperparameters.json\"\n"
       << "if [ -s \"$hyper\" ]; then\n"
       << "  while IFS= read -r -d '' word; do args+=(\"$word\"); done < <(\n"
       << "    jq -j 'to_entries[] | \"--\\(.key)\\u0000\\(.value)\\u0000\"' "
          "\"$hyper\")\n"
       << "fi\n";
  } else {
    os << "# Vertex AI gives Cloud Storage URIs; its containers see "
          "gs://BUCKET/PATH at /gcs/BUCKET/PATH.\n"
       << "gcs=${DT_GCS_ROOT:-/gcs}\n"
       << "local_path() { case \"$1\" in gs://*) echo \"$gcs/${1#gs://}\" ;; "
          "*) echo \"$1\" ;; esac; }\n"
       << ": \"${AIP_MODEL_DIR:?is set by Vertex AI under the base output "
          "directory of the job}\"\n"
       << "base=${AIP_MODEL_DIR%/}; base=${base%/*}  # the base output "
          "directory\n"
       << "model=$(local_path \"$AIP_MODEL_DIR\")\n"
       << "checkpoints=$(local_path "
          "\"${AIP_CHECKPOINT_DIR:-$base/checkpoints}\")\n"
       << "logs=$(local_path \"$base/logs\")\n"
       << "# Pool 0 holds the first host, which writes the model.\n"
       << "# Vertex AI may leave CLUSTER_SPEC out for a job of one replica.\n"
       << "if [ -z \"${CLUSTER_SPEC:-}\" ]; then\n"
       << "  export CLUSTER_SPEC='{\"cluster\": {\"workerpool0\": "
          "[\"localhost:29500\"]}, \"task\": {\"type\": \"workerpool0\", \"index\": 0}}'\n"
       << "fi\n"
       << "hosts=$(jq '[.cluster[] | length] | add' <<<\"$CLUSTER_SPEC\")\n"
       << "first_host=$(jq -r '.task.type == \"workerpool0\"' "
          "<<<\"$CLUSTER_SPEC\")\n"
       << "# A restarted job continues from the newest checkpoint.\n"
       << "args+=(--checkpoint-dir \"$checkpoints\" --log-dir \"$logs\" "
          "--resume auto)\n";
  }
  std::vector<int64_t> smaller = smallerHostCounts(job, hostCount(d, platform));
  os << "\n# A restarted job may get fewer hosts than it asked for: the "
        "package holds the\n# program built for each host count the mesh "
        "allows, and the checkpoint reshards.\n"
     << "declared_hosts=" << hostCount(d, platform) << "\n"
     << "if [ \"$hosts\" != \"$declared_hosts\" ]; then\n"
     << "  if [ ! -x \"$program.hosts-$hosts\" ]; then\n"
     << "    echo \"entrypoint.sh: error: this job runs on $hosts host(s), but "
        "its program is built for $declared_hosts"
     << (smaller.empty() ? std::string()
                         : " (and for " +
                               llvm::join(llvm::map_range(smaller,
                                                          [](int64_t h) {
                                                            return std::to_string(
                                                                h);
                                                          }),
                                          ", ") +
                               ")")
     << "; start it on one of those\" >&2\n"
     << "    exit 2\n"
     << "  fi\n"
     << "  echo \"entrypoint.sh: $hosts of the $declared_hosts hosts the job "
        "asked for: running the program built for $((hosts * "
        "ranks_per_host)) ranks\" >&2\n"
     << "  program=\"$program.hosts-$hosts\"\n"
     << "fi\n";
  os << R"(
mkdir -p "$model"
declare -A alive=()
stop() { kill -TERM "${!alive[@]}" 2>/dev/null || true; }
trap stop TERM INT
# After a rank failed the others cannot checkpoint (that takes every rank):
# they get a few seconds to say why they stop, then end.
end_all() {
  stop
  (sleep 10; kill -KILL "${!alive[@]}" 2>/dev/null) &
}
for ((i = 0; i < ranks_per_host; i++)); do
  LOCAL_RANK=$i LOCAL_WORLD_SIZE=$ranks_per_host "$program" "${args[@]}" "$@" &
  alive[$!]=1
done
# The first rank to fail ends the others, as every launcher does.
status=0
while [ ${#alive[@]} -gt 0 ]; do
  done_pid="" code=0
  wait -n -p done_pid "${!alive[@]}" || code=$?
  # A signal woke wait, not a rank: the ranks have it too and checkpoint.
  [ -n "${done_pid:-}" ] || continue
  unset "alive[$done_pid]"
  if [ $code -ne 0 ] && [ $status -eq 0 ]; then
    status=$code
    # A rank stopped by the signal has checkpointed with the others.
    if [ $code -ne 143 ] && [ $code -ne 130 ]; then end_all; fi
  fi
done
)";
  os << "# The trained model: the newest checkpoint, where the platform "
        "uploads models.\n"
     << "if [ $status -eq 0 ] && [ \"$first_host\" = true ] && "
        "[ -d \"${checkpoints:-}\" ]; then\n"
     << "  newest=$(ls -d \"$checkpoints\"/step_* 2>/dev/null | sort | tail -n "
        "1)\n"
     << "  if [ -n \"$newest\" ]; then cp -r \"$newest\" \"$model/\"; fi\n"
     << "fi\n"
     << "exit $status\n";
  return s;
}

// --- The container ----------------------------------------------------------

std::string dockerfile(const Job &job, Platform platform,
                       llvm::StringRef program) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "# Generated by dtc --package " << platformName(platform) << " for job '"
     << job.name << "'.\n"
     << "# The program links Open MPI, OpenBLAS, fmt and zlib dynamically and "
        "the CUDA\n"
     << "# runtime statically; ompi-server (openmpi-bin) lets ranks that no "
        "MPI launcher\n"
     << "# started join one MPI world, and jq reads SageMaker's "
        "hyperparameters.\n"
     << "FROM " << kBaseImage << "\n"
     << "RUN apt-get update \\\n"
     << " && DEBIAN_FRONTEND=noninteractive apt-get install -y "
        "--no-install-recommends \\\n"
     << "      libopenblas0-pthread libopenmpi3t64 openmpi-bin libfmt9 zlib1g "
        "jq \\\n"
     << " && rm -rf /var/lib/apt/lists/*\n"
     << "# Platforms run the container as root; Open MPI refuses root unless "
        "told.\n"
     << "ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n"
     << "COPY " << program << " entrypoint.sh /opt/dt/\n"
     << "ENTRYPOINT [\"/opt/dt/entrypoint.sh\"]\n";
  return s;
}

// --- The job requests -------------------------------------------------------

llvm::json::Value sageMakerRequest(const Job &job, const DeployConfig &d) {
  using llvm::json::Array;
  using llvm::json::Object;
  // What the progress line prints (runtime/lib/loop.cpp), as CloudWatch
  // metrics: numeric captures only.
  Array metrics;
  for (auto [name, regex] :
       {std::pair{"train:loss", "step [0-9]+/[0-9]+ +loss ([0-9.eE+-]+)"},
        {"train:lr", " lr ([0-9.eE+-]+)"},
        {"train:grad_norm", "grad norm ([0-9.eE+-]+)"},
        {"eval:loss", "eval at step [0-9]+: loss ([0-9.eE+-]+)"}})
    metrics.push_back(Object{{"Name", name}, {"Regex", regex}});
  Object request{
      {"TrainingJobName", jobName(job)},
      {"AlgorithmSpecification",
       Object{{"TrainingImage", str(d, "image")},
              {"TrainingInputMode", "File"},
              {"MetricDefinitions", std::move(metrics)}}},
      {"RoleArn", str(d, "role")},
      {"OutputDataConfig", Object{{"S3OutputPath", str(d, "output_uri")}}},
      {"ResourceConfig",
       Object{{"InstanceType", str(d, "instance")},
              {"InstanceCount", num(d, "count", 1)},
              {"VolumeSizeInGB", num(d, "volume_size", 50)}}},
  };
  Array channels;
  for (auto &[name, uri] : record(d, "channels"))
    channels.push_back(Object{
        {"ChannelName", name},
        {"DataSource",
         Object{{"S3DataSource",
                 Object{{"S3DataType", "S3Prefix"},
                        {"S3Uri", uri},
                        {"S3DataDistributionType", "FullyReplicated"}}}}},
        {"InputMode", "File"}});
  if (!channels.empty())
    request["InputDataConfig"] = std::move(channels);
  Object stopping{{"MaxRuntimeInSeconds", seconds(d, "max_run").value_or(86400)}};
  if (flag(d, "spot")) {
    request["EnableManagedSpotTraining"] = true;
    stopping["MaxWaitTimeInSeconds"] = *seconds(d, "max_wait");
  }
  request["StoppingCondition"] = std::move(stopping);
  if (d.get("checkpoint_uri"))
    request["CheckpointConfig"] = Object{{"S3Uri", str(d, "checkpoint_uri")},
                                         {"LocalPath", "/opt/ml/checkpoints"}};
  Object env;
  for (auto &[name, value] : record(d, "environment"))
    env[name] = value;
  if (!env.empty())
    request["Environment"] = std::move(env);
  return request;
}

/// Vertex's CustomJobSpec: pool 0 is the master's machine, pool 1 the rest.
llvm::json::Value vertexJobSpec(const DeployConfig &d) {
  using llvm::json::Array;
  using llvm::json::Object;
  Object machine{{"machineType", str(d, "machine")}};
  if (d.get("accelerator")) {
    machine["acceleratorType"] = str(d, "accelerator");
    machine["acceleratorCount"] = num(d, "accelerator_count", 1);
  }
  Array env;
  for (auto &[name, value] : record(d, "environment"))
    env.push_back(Object{{"name", name}, {"value", value}});
  auto pool = [&](int64_t replicas) {
    Object container{{"imageUri", str(d, "image")}};
    if (!env.empty())
      container["env"] = llvm::json::Value(Array(env));
    return Object{{"machineSpec", Object(machine)},
                  {"replicaCount", replicas},
                  {"containerSpec", std::move(container)},
                  {"diskSpec",
                   Object{{"bootDiskType", "pd-ssd"}, {"bootDiskSizeGb", 100}}}};
  };
  int64_t replicas = num(d, "replicas", 1);
  Array pools;
  pools.push_back(pool(1));
  if (replicas > 1)
    pools.push_back(pool(replicas - 1));
  Object spec{{"workerPoolSpecs", std::move(pools)},
              {"baseOutputDirectory",
               Object{{"outputUriPrefix", str(d, "base_output_dir")}}}};
  // A restarted worker restarts the whole job: the ranks of one mesh
  // cannot go on without it, and they all resume from the checkpoint.
  Object scheduling{{"restartJobOnWorkerRestart", true}};
  if (flag(d, "spot"))
    scheduling["strategy"] = "SPOT";
  spec["scheduling"] = std::move(scheduling);
  if (d.get("service_account"))
    spec["serviceAccount"] = str(d, "service_account");
  return spec;
}

// --- The README -------------------------------------------------------------

std::string readme(const Job &job, Platform platform, const DeployConfig &d,
                   llvm::StringRef program) {
  std::string s;
  llvm::raw_string_ostream os(s);
  std::string image = str(d, "image");
  int64_t world = job.parallel.getWorldSize();
  int64_t hosts = hostCount(d, platform);
  os << "# " << job.name << " on "
     << (platform == Platform::SageMaker ? "Amazon SageMaker" : "Vertex AI")
     << "\n\nGenerated by `dtc --package " << platformName(platform)
     << "` from the job's `deploy " << platformName(platform)
     << "` block. Submit it as it is:\n\n```sh\n"
     << "docker build -t " << image << " .\n"
     << "docker push " << image << "\n";
  if (platform == Platform::SageMaker)
    os << "aws sagemaker create-training-job --cli-input-json "
          "file://create-training-job.json \\\n"
       << "    --training-job-name " << jobName(job)
       << "-$(date +%Y%m%d-%H%M%S)"
       << (d.get("region") ? " --region " + str(d, "region") : std::string())
       << "\n```\n\n";
  else
    os << "gcloud ai custom-jobs create --display-name " << jobName(job)
       << " --config custom-job-spec.json --region "
       << str(d, "region", "us-central1")
       << (d.get("project") ? " --project " + str(d, "project")
                            : std::string())
       << "\n```\n\n";
  os << "| File | What it is |\n|---|---|\n"
     << "| `" << program
     << "` | the training program, compiled for any x86-64 CPU with AVX2 "
        "(x86-64-v3) |\n"
     << "| `entrypoint.sh` | starts this host's ranks with the platform's "
        "directories as options |\n"
     << "| `Dockerfile` | the image, on `" << kBaseImage << "` |\n";
  if (platform == Platform::SageMaker)
    os << "| `create-training-job.json` | the `CreateTrainingJob` request |\n";
  else
    os << "| `custom-job-spec.json` | the `CustomJobSpec` that `gcloud "
          "--config` takes |\n"
       << "| `custom-job.json` | the whole `CustomJob`, for the REST API "
          "(`projects.locations.customJobs.create`) |\n";
  std::vector<int64_t> smaller = smallerHostCounts(job, hosts);
  if (!smaller.empty()) {
    os << "| `" << program << ".hosts-N` | the program for a restart on N of "
       << "the hosts (N = ";
    for (size_t i = 0; i < smaller.size(); ++i)
      os << (i ? ", " : "") << smaller[i];
    os << "): the data-parallel axis shrinks, each rank keeps its micro-batch "
          "and the global batch stays |\n";
  }
  os << "\nThe mesh's " << plural(world, "rank") << " run as " << world / hosts
     << " per host on " << plural(hosts, "host")
     << "; the program detects the platform, prints what it found, and "
        "the ranks of all hosts meet at the first host.\n\n";
  if (platform == Platform::SageMaker) {
    os << "Data arrives through the request's channels in "
          "`/opt/ml/input/data/CHANNEL/`; `entrypoint.sh` points the "
          "program's data there. Hyperparameters of the request become the "
          "program's options (`{\"steps\": \"100\"}` is `--steps 100`).";
    if (d.get("checkpoint_uri"))
      os << " Checkpoints go to `/opt/ml/checkpoints`, which SageMaker keeps "
            "in sync with `"
         << str(d, "checkpoint_uri")
         << "`: a job that is interrupted (managed spot) and restarted "
            "resumes from the newest one.";
    os << " The newest checkpoint is copied to `/opt/ml/model` at the end, "
          "and metrics to `/opt/ml/output/data/run/metrics.jsonl`.\n";
  } else {
    os << "Vertex AI sets `AIP_MODEL_DIR` and `AIP_CHECKPOINT_DIR` under `"
       << str(d, "base_output_dir")
       << "`; the entry point reads and writes them through the Cloud Storage "
          "mount (`/gcs/BUCKET/...`), so every host shares the checkpoints "
          "and a restarted job resumes from the newest one. Data paths in "
          "the program are read as they are: give them as "
          "`/gcs/BUCKET/...` to read from Cloud Storage.\n";
  }
  os << "\nNot yet: the program trains on the instances' CPUs. GPU code "
        "generation is being built (dt issue 6); until it lands, a GPU "
        "instance runs the same CPU program, one rank per GPU slot.\n";
  return s;
}

mlir::LogicalResult writeFile(llvm::StringRef dir, llvm::StringRef name,
                              llvm::StringRef text, bool executable,
                              std::string &error) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec) {
    os << text;
    os.close();
    ec = os.error();
  }
  if (!ec && executable)
    ec = llvm::sys::fs::setPermissions(path, llvm::sys::fs::all_read |
                                                 llvm::sys::fs::all_exe |
                                                 llvm::sys::fs::owner_write);
  if (ec) {
    error = ("cannot write '" + path + "': " + ec.message()).str();
    return failure();
  }
  return success();
}

} // namespace

mlir::LogicalResult package::checkPackage(const Job &job, Platform platform,
                                          mlir::MLIRContext &context) {
  const DeployConfig *d = findDeploy(job, platform);
  auto at = [&](const Location &loc) {
    return mlir::FileLineColLoc::get(&context, loc.file, loc.line, loc.col);
  };
  if (!d) {
    mlir::emitError(at(job.loc))
        << "--package " << platformName(platform) << " needs a `deploy "
        << platformName(platform) << " { ... }` block: its keys are the job "
        << "request's fields";
    return failure();
  }
  int64_t world = job.parallel.getWorldSize();
  int64_t hosts = hostCount(*d, platform);
  if (world % hosts != 0) {
    mlir::emitError(at(d->loc))
        << "deploy " << platformName(platform) << " starts " << hosts
        << " hosts, which cannot share the mesh's " << world
        << " ranks evenly";
    return failure();
  }
  if (platform == Platform::SageMaker) {
    if (!d->get("output_uri")) {
      mlir::emitError(at(d->loc))
          << "--package sagemaker needs output_uri: CreateTrainingJob "
             "uploads the model and outputs to an S3 path";
      return failure();
    }
    if (flag(*d, "spot") && !d->get("max_wait")) {
      mlir::emitError(at(d->loc))
          << "spot training needs max_wait: how long SageMaker may wait "
             "for spot capacity, at least max_run";
      return failure();
    }
    if (flag(*d, "spot") && !d->get("checkpoint_uri")) {
      mlir::emitError(at(d->loc))
          << "spot training needs checkpoint_uri: without checkpoints an "
             "interrupted job starts again from step 0";
      return failure();
    }
    if (hosts > 1 && d->get("checkpoint_uri")) {
      mlir::emitError(at(d->loc))
          << "a SageMaker job of " << hosts
          << " instances cannot checkpoint yet: every rank writes its pieces "
             "into one checkpoint directory, and each instance's "
             "/opt/ml/checkpoints is its own disk; use count = 1, or Vertex "
             "AI, whose Cloud Storage mount is shared";
      return failure();
    }
    std::vector<DataFile> files = dataFiles(job);
    for (const DataFile &f : files)
      if (!channelFor(f, files, *d)) {
        mlir::emitError(at(d->loc))
            << "the " << f.role << " data ('" << f.path
            << "') reaches a SageMaker job only through a channel: add "
            << "channels = {" << f.role << ": \"s3://...\"}";
        return failure();
      }
  } else if (!d->get("base_output_dir")) {
    mlir::emitError(at(d->loc))
        << "--package vertex needs base_output_dir: Vertex AI gives the job "
           "its model and checkpoint directories under it";
    return failure();
  }
  return success();
}

mlir::LogicalResult package::writePackage(const Job &job, Platform platform,
                                          llvm::StringRef dir,
                                          llvm::StringRef program,
                                          llvm::ArrayRef<std::string> rebuild,
                                          std::string &error) {
  const DeployConfig &d = *findDeploy(job, platform);
  int64_t hosts = hostCount(d, platform);
  int64_t perHost = job.parallel.getWorldSize() / hosts;
  for (int64_t h : smallerHostCounts(job, hosts)) {
    llvm::SmallString<256> out(dir);
    llvm::sys::path::append(out, program.str() + ".hosts-" + std::to_string(h));
    std::vector<std::string> args(rebuild.begin(), rebuild.end());
    args.push_back("--world-size=" + std::to_string(h * perHost));
    args.push_back("--portable");
    args.push_back("-o");
    args.push_back(std::string(out));
    llvm::SmallVector<llvm::StringRef> refs(args.begin(), args.end());
    std::string message;
    if (llvm::sys::ExecuteAndWait(args.front(), refs, std::nullopt, {}, 0, 0,
                                  &message) != 0) {
      error = "building the program for " + std::to_string(h) +
              " host(s) failed" + (message.empty() ? "" : ": " + message);
      return failure();
    }
  }
  if (failed(writeFile(dir, "entrypoint.sh",
                       entryPoint(job, platform, d, program), true, error)) ||
      failed(writeFile(dir, "Dockerfile", dockerfile(job, platform, program),
                       false, error)) ||
      failed(writeFile(dir, "README.md", readme(job, platform, d, program),
                       false, error)))
    return failure();
  if (platform == Platform::SageMaker)
    return writeFile(dir, "create-training-job.json",
                     jsonText(sageMakerRequest(job, d)), false, error);
  llvm::json::Value spec = vertexJobSpec(d);
  if (failed(writeFile(dir, "custom-job-spec.json", jsonText(spec), false,
                       error)))
    return failure();
  llvm::json::Object whole{{"displayName", jobName(job)},
                           {"jobSpec", std::move(spec)}};
  return writeFile(dir, "custom-job.json", jsonText(std::move(whole)), false,
                   error);
}
