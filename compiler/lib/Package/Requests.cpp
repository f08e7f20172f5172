//===- Requests.cpp - SageMaker's and Vertex AI's job requests ------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The requests as the platforms' APIs document them: SageMaker's
// CreateTrainingJob and Vertex AI's CustomJobSpec, every field from the
// deploy block (docs/language.md, section 12.1).
//
//===----------------------------------------------------------------------===//

#include "Deploy.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace dt::package {

std::string jsonText(llvm::json::Value value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", value) << "\n";
  return text;
}

llvm::json::Value sageMakerRequest(const Job &job, const DeployConfig &d) {
  using llvm::json::Array;
  using llvm::json::Object;
  // What the progress line prints (runtime/lib/loop.cpp), as CloudWatch
  // metrics: numeric captures only (MFU appears on GPUs with a known peak;
  // test/e2e/launchers/package.test feeds a run's output through these).
  Array metrics;
  for (auto [name, regex] :
       {std::pair{"train:loss", "step [0-9]+/[0-9]+ +loss ([0-9.eE+-]+)"},
        {"train:lr", " lr ([0-9.eE+-]+)"},
        {"train:grad_norm", "grad norm ([0-9.eE+-]+)"},
        {"train:mfu_percent", "MFU ([0-9.]+)%"},
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

} // namespace dt::package
