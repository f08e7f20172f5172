#!/usr/bin/env python3
"""Runs a `dtc --package` entry point under a simulated platform on this machine.

  run_platform.py sagemaker|vertex --root DIR [--hosts N] [--stop-at-step K]
                  [--hyper JSON] -- ENTRYPOINT [ARGS...]

Each host is one entry point process, given what the platform gives a
container: SageMaker's /opt/ml tree under DIR (resourceconfig.json,
hyperparameters.json; DT_SAGEMAKER_ROOT points the entry point there), or
Vertex AI's CLUSTER_SPEC and AIP_* Cloud Storage URIs, whose /gcs mount is
DIR/gcs (DT_GCS_ROOT). Host names do not resolve here, so MASTER_ADDR names the
loopback address; everything else is the platform's.

With --stop-at-step K, once host 0 prints step K every host gets SIGTERM, as a
spot interruption sends it. Host 0's output is printed, the others' on stderr.
Exits 0 when every host ends with --expect-status (default 0), else with the
first other status.
"""

import argparse
import json
import re
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    argv = sys.argv[1:]
    cut = argv.index("--")
    parser = argparse.ArgumentParser()
    parser.add_argument("platform", choices=["sagemaker", "vertex"])
    parser.add_argument("--root", required=True)
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--stop-at-step", type=int, default=0)
    parser.add_argument("--hyper", default="{}")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--expect-status", type=int, default=0,
                        help="the status every host must end with (143 "
                             "after a SIGTERM); then exit 0")
    args = parser.parse_args(argv[:cut])
    command = argv[cut + 1:]
    root = os.path.abspath(args.root)
    port = free_port()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("OMPI_COMM", "PMI", "SLURM_", "SM_", "RANK",
                                 "WORLD_SIZE", "LOCAL_", "MASTER_",
                                 "CLUSTER_SPEC", "AIP_", "TORCHELASTIC_"))}
    names = [f"algo-{i + 1}" for i in range(args.hosts)]
    procs = []
    for host in range(args.hosts):
        env = dict(base)
        env["MASTER_ADDR"] = "127.0.0.1"
        if args.platform == "sagemaker":
            ml = os.path.join(root, names[host])
            config = os.path.join(ml, "input", "config")
            os.makedirs(config, exist_ok=True)
            json.dump({"current_host": names[host], "hosts": names,
                       "network_interface_name": "eth0"},
                      open(os.path.join(config, "resourceconfig.json"), "w"))
            json.dump(json.loads(args.hyper),
                      open(os.path.join(config, "hyperparameters.json"), "w"))
            env["DT_SAGEMAKER_ROOT"] = ml
            env["MASTER_PORT"] = str(port)
        else:
            spec = {"cluster": {"workerpool0": [f"{names[0]}:{port}"]},
                    "environment": "cloud",
                    "task": {"type": "workerpool0" if host == 0 else
                             "workerpool1", "index": max(0, host - 1)}}
            if args.hosts > 1:
                spec["cluster"]["workerpool1"] = [f"{n}:{port}"
                                                  for n in names[1:]]
            env["CLUSTER_SPEC"] = json.dumps(spec)
            env["AIP_MODEL_DIR"] = "gs://dt-test/job/model/"
            env["AIP_CHECKPOINT_DIR"] = "gs://dt-test/job/checkpoints/"
            env["DT_GCS_ROOT"] = os.path.join(root, "gcs")
        out = open(os.path.join(root, f"host-{host}.out"), "w+")
        procs.append((out, subprocess.Popen(command, env=env, stdout=out,
                                            stderr=subprocess.STDOUT)))
    deadline = time.monotonic() + args.timeout
    stopped = False
    while any(p.poll() is None for _, p in procs):
        if time.monotonic() > deadline:
            for _, p in procs:
                p.kill()
            break
        if args.stop_at_step and not stopped:
            text = open(os.path.join(root, "host-0.out")).read()
            if re.search(rf"^step +{args.stop_at_step}/", text, re.M):
                for _, p in procs:
                    p.send_signal(signal.SIGTERM)
                stopped = True
        time.sleep(0.05)
    status = 0
    for host, (out, p) in enumerate(procs):
        p.wait()
        out.seek(0)
        text = out.read()
        (sys.stdout if host == 0 else sys.stderr).write(
            text if host == 0 else f"--- host {host}:\n{text}")
        if p.returncode != args.expect_status and not status:
            status = p.returncode or 1
            print(f"run_platform.py: host {host} ended with {p.returncode}, "
                  f"not {args.expect_status}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
