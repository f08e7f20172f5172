#!/usr/bin/env python3
"""check_job.py sagemaker|vertex FILE: checks a job request dtc wrote against the
documented shape of the platform's API, field by field: required fields present,
no field the API does not have, types, enums and limits.

SageMaker: CreateTrainingJob (docs.aws.amazon.com/sagemaker/latest/APIReference/
API_CreateTrainingJob.html). Vertex AI: CustomJob and CustomJobSpec
(cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec). Only the
fields dtc can write are known here; an unknown one is an error.
"""

import json
import re
import sys

errors = []


def need(cond, what):
    if not cond:
        errors.append(what)


def fields(obj, where, required, optional=()):
    need(isinstance(obj, dict), f"{where} is not an object")
    if not isinstance(obj, dict):
        return
    for key in required:
        need(key in obj, f"{where}.{key} is required")
    for key in obj:
        need(key in required or key in optional,
             f"{where}.{key} is not a field of the API")


def sagemaker(job):
    fields(job, "request",
           ["TrainingJobName", "AlgorithmSpecification", "RoleArn",
            "OutputDataConfig", "ResourceConfig", "StoppingCondition"],
           ["InputDataConfig", "EnableManagedSpotTraining", "CheckpointConfig",
            "Environment", "HyperParameters"])
    need(re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
                      job.get("TrainingJobName", "")), "TrainingJobName pattern")
    algo = job.get("AlgorithmSpecification", {})
    fields(algo, "AlgorithmSpecification", ["TrainingInputMode"],
           ["TrainingImage", "MetricDefinitions"])
    need(algo.get("TrainingInputMode") in ("File", "Pipe", "FastFile"),
         "TrainingInputMode enum")
    metrics = algo.get("MetricDefinitions", [])
    need(len(metrics) <= 40, "at most 40 MetricDefinitions")
    for m in metrics:
        fields(m, "MetricDefinition", ["Name", "Regex"])
        need(1 <= len(m.get("Name", "")) <= 255, "metric Name length")
        need(1 <= len(m.get("Regex", "")) <= 500, "metric Regex length")
        need(re.compile(m.get("Regex", "")).groups == 1,
             f"metric {m.get('Name')} captures one number")
    need(20 <= len(job.get("RoleArn", "")) <= 2048
         and job.get("RoleArn", "").startswith("arn:"), "RoleArn")
    out = job.get("OutputDataConfig", {})
    fields(out, "OutputDataConfig", ["S3OutputPath"], ["KmsKeyId"])
    need(out.get("S3OutputPath", "").startswith("s3://"), "S3OutputPath")
    res = job.get("ResourceConfig", {})
    fields(res, "ResourceConfig", ["VolumeSizeInGB"],
           ["InstanceType", "InstanceCount"])
    need(res.get("InstanceType", "").startswith("ml."), "InstanceType")
    need(isinstance(res.get("InstanceCount"), int) and res["InstanceCount"] >= 1,
         "InstanceCount")
    need(isinstance(res.get("VolumeSizeInGB"), int) and res["VolumeSizeInGB"] >= 1,
         "VolumeSizeInGB")
    for ch in job.get("InputDataConfig", []):
        fields(ch, "Channel", ["ChannelName", "DataSource"], ["InputMode"])
        need(re.fullmatch(r"[A-Za-z0-9.\-_]{1,64}", ch.get("ChannelName", "")),
             "ChannelName pattern")
        s3 = ch.get("DataSource", {}).get("S3DataSource", {})
        fields(s3, "S3DataSource", ["S3DataType", "S3Uri"],
               ["S3DataDistributionType"])
        need(s3.get("S3DataType") in ("ManifestFile", "S3Prefix",
                                      "AugmentedManifestFile"), "S3DataType")
        need(s3.get("S3DataDistributionType", "FullyReplicated") in
             ("FullyReplicated", "ShardedByS3Key"), "S3DataDistributionType")
    stop = job.get("StoppingCondition", {})
    fields(stop, "StoppingCondition", [],
           ["MaxRuntimeInSeconds", "MaxWaitTimeInSeconds"])
    if job.get("EnableManagedSpotTraining"):
        need("MaxWaitTimeInSeconds" in stop, "spot needs MaxWaitTimeInSeconds")
        need(stop.get("MaxWaitTimeInSeconds", 0) >=
             stop.get("MaxRuntimeInSeconds", 0), "MaxWait >= MaxRuntime")
    if "CheckpointConfig" in job:
        fields(job["CheckpointConfig"], "CheckpointConfig", ["S3Uri"],
               ["LocalPath"])


ACCELERATORS = {"NVIDIA_TESLA_K80", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_V100",
                "NVIDIA_TESLA_P4", "NVIDIA_TESLA_T4", "NVIDIA_TESLA_A100",
                "NVIDIA_A100_80GB", "NVIDIA_L4", "NVIDIA_H100_80GB",
                "NVIDIA_H100_MEGA_80GB", "NVIDIA_H200_141GB", "NVIDIA_B200",
                "TPU_V2", "TPU_V3", "TPU_V4_POD", "TPU_V5_LITEPOD"}


def vertex_spec(spec, where):
    fields(spec, where, ["workerPoolSpecs"],
           ["baseOutputDirectory", "scheduling", "serviceAccount"])
    pools = spec.get("workerPoolSpecs", [])
    need(1 <= len(pools) <= 4, "one to four worker pools")
    for i, pool in enumerate(pools):
        w = f"{where}.workerPoolSpecs[{i}]"
        fields(pool, w, ["machineSpec", "replicaCount", "containerSpec"],
               ["diskSpec"])
        fields(pool.get("machineSpec", {}), w + ".machineSpec", ["machineType"],
               ["acceleratorType", "acceleratorCount"])
        acc = pool.get("machineSpec", {}).get("acceleratorType")
        need(acc is None or acc in ACCELERATORS, f"{w} acceleratorType {acc}")
        need(int(pool.get("replicaCount", 0)) >= 1, f"{w}.replicaCount")
        need(i > 0 or int(pool.get("replicaCount", 0)) == 1,
             "pool 0 runs the master: one replica")
        fields(pool.get("containerSpec", {}), w + ".containerSpec",
               ["imageUri"], ["command", "args", "env"])
        for e in pool.get("containerSpec", {}).get("env", []):
            fields(e, w + ".env[]", ["name", "value"])
        if "diskSpec" in pool:
            fields(pool["diskSpec"], w + ".diskSpec", [],
                   ["bootDiskType", "bootDiskSizeGb"])
    if "baseOutputDirectory" in spec:
        fields(spec["baseOutputDirectory"], "baseOutputDirectory",
               ["outputUriPrefix"])
        need(spec["baseOutputDirectory"].get("outputUriPrefix", "")
             .startswith("gs://"), "outputUriPrefix")
    sched = spec.get("scheduling", {})
    fields(sched, "scheduling", [],
           ["timeout", "restartJobOnWorkerRestart", "strategy",
            "disableRetries", "maxWaitDuration"])
    need(sched.get("strategy", "STRATEGY_UNSPECIFIED") in
         ("STRATEGY_UNSPECIFIED", "ON_DEMAND", "LOW_COST", "STANDARD", "SPOT",
          "FLEX_START"), "scheduling.strategy enum")


def main():
    kind, path = sys.argv[1], sys.argv[2]
    job = json.load(open(path))
    if kind == "sagemaker":
        sagemaker(job)
    elif kind == "vertex-spec":
        vertex_spec(job, "spec")
    elif kind == "vertex":
        fields(job, "job", ["displayName", "jobSpec"])
        vertex_spec(job.get("jobSpec", {}), "jobSpec")
    else:
        sys.exit(f"check_job.py: unknown kind {kind}")
    if errors:
        sys.exit(f"{path}: " + "; ".join(errors))
    print(f"{path}: a valid {kind} request")


if __name__ == "__main__":
    main()
