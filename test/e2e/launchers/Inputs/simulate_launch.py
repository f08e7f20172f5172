#!/usr/bin/env python3
"""Starts the ranks of a program the way a cluster launcher would, on one machine.

  simulate_launch.py LAUNCHER [--nodes N] [--per-node P] [--port PORT]
                     [--skip-rank R] -- PROGRAM ARGS...

LAUNCHER is one of slurm, torchrun, sagemaker, vertex. Each "node" is a group of
P processes with their own local ranks, named by a loopback address of its own
(127.0.0.1, 127.0.0.2, ...), and each process sees only the variables that
launcher sets (see docs/operations.md): nothing tells the program it is a test.
Like the real launchers, the first rank to fail ends the others. Every rank's
output goes to rank-<r>.out in the working directory; rank 0's is also echoed.
Exits with the first failing rank's status, 0 when all succeed.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_address(node):
    return f"127.0.0.{node + 1}"


def environment(launcher, node, local, nodes, per_node, port):
    rank = node * per_node + local
    world = nodes * per_node
    hosts = [node_address(n) for n in range(nodes)]
    if launcher == "slurm":
        # srun without --mpi=pmix: the program meets at the first node.
        return {
            "SLURM_JOB_ID": "77", "SLURM_PROCID": str(rank),
            "SLURM_STEP_NUM_TASKS": str(world), "SLURM_NTASKS": str(world),
            "SLURM_LOCALID": str(local), "SLURM_NODEID": str(node),
            "SLURM_STEP_NUM_NODES": str(nodes), "SLURM_NNODES": str(nodes),
            "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x{nodes})",
            "SLURM_STEP_NODELIST": f"127.0.0.[1-{nodes}]",
            "SLURM_JOB_NODELIST": f"127.0.0.[1-{nodes}]",
            "MASTER_PORT": str(port),
        }
    if launcher == "torchrun":
        # What torchrun's agent gives each worker, minus the agent store.
        return {
            "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(local), "LOCAL_WORLD_SIZE": str(per_node),
            "GROUP_RANK": str(node), "GROUP_WORLD_SIZE": str(nodes),
            "ROLE_RANK": str(rank), "MASTER_ADDR": hosts[0],
            "MASTER_PORT": str(port), "TORCHELASTIC_RUN_ID": "simulated",
        }
    if launcher == "sagemaker":
        # The platform's per-host variables; an entry point numbers the
        # processes of a host with LOCAL_RANK.
        return {
            "SM_HOSTS": json.dumps(hosts), "SM_CURRENT_HOST": hosts[node],
            "SM_NUM_GPUS": "0", "SM_NUM_CPUS": str(per_node),
            "LOCAL_RANK": str(local), "LOCAL_WORLD_SIZE": str(per_node),
            # SageMaker sets no port (the program's default is 29500); tests
            # running side by side each need their own.
            "MASTER_PORT": str(port),
        }
    if launcher == "vertex":
        spec = {
            "cluster": {
                "workerpool0": [f"{hosts[0]}:{port}"],
                "workerpool1": [f"{h}:{port}" for h in hosts[1:]],
            },
            "environment": "cloud",
            "task": {"type": "workerpool0" if node == 0 else "workerpool1",
                     "index": 0 if node == 0 else node - 1},
        }
        return {
            "CLUSTER_SPEC": json.dumps(spec),
            "LOCAL_RANK": str(local), "LOCAL_WORLD_SIZE": str(per_node),
        }
    raise SystemExit(f"simulate_launch.py: unknown launcher {launcher}")


LAUNCHER_VARIABLES = ("OMPI_", "PMI_", "PMIX_", "SLURM_", "SM_", "RANK",
                      "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                      "MASTER_ADDR", "MASTER_PORT", "CLUSTER_SPEC",
                      "TORCHELASTIC_", "GROUP_")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("launcher")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--per-node", type=int, default=2)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--skip-rank", type=int, default=-1,
                        help="start every rank but this one (a lost node)")
    argv = sys.argv[1:]
    if "--" not in argv:
        parser.error("give the program after --")
    cut = argv.index("--")
    args = parser.parse_args(argv[:cut])
    command = argv[cut + 1:]
    port = args.port or free_port()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(LAUNCHER_VARIABLES)}
    procs = []
    for node in range(args.nodes):
        for local in range(args.per_node):
            rank = node * args.per_node + local
            if rank == args.skip_rank:
                continue
            env = dict(base)
            env.update(environment(args.launcher, node, local, args.nodes,
                                   args.per_node, port))
            out = open(f"rank-{rank}.out", "w")
            procs.append((rank, out, subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT)))
    deadline = time.monotonic() + args.timeout
    status = 0
    running = list(procs)
    while running and time.monotonic() < deadline:
        time.sleep(0.05)
        for item in list(running):
            rank, out, p = item
            if p.poll() is None:
                continue
            running.remove(item)
            if p.returncode != 0 and status == 0:
                status = p.returncode
                print(f"simulate_launch.py: rank {rank} failed "
                      f"({p.returncode}); ending the others", file=sys.stderr)
                for _, _, q in running:
                    q.terminate()
    for _, _, p in running:
        p.kill()
        status = status or 124
    for rank, out, p in procs:
        p.wait()
        out.close()
    if os.path.exists("rank-0.out"):
        sys.stdout.write(open("rank-0.out").read())
    for rank, _, _ in procs:
        if rank == 0:
            continue
        text = open(f"rank-{rank}.out").read()
        if text:
            sys.stderr.write(f"--- rank {rank}:\n{text}")
    return status


if __name__ == "__main__":
    sys.exit(main())
