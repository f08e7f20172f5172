#!/usr/bin/env bash
# torchrun_nodes.sh NODES PER_NODE -- PROGRAM ARGS...: the real torchrun (Debian's
# python3-torch) as NODES agents on this machine, as on NODES nodes with a
# static rendezvous at 127.0.0.1, each agent starting PER_NODE workers. Worker
# output lands in logs<node>/; rank 0's is printed. Exits non-zero when any
# agent fails.
set -u
nodes=$1 per_node=$2
shift 3 # NODES PER_NODE --
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Debian's torch 1.13 under Python 3.11 needs the redirects per local rank.
redirects=$(seq -s, 0 $((per_node - 1)) | sed 's/\([0-9]\+\)/\1:1/g')
tees=$(seq -s, 0 $((per_node - 1)) | sed 's/\([0-9]\+\)/\1:2/g')
pids=()
for ((n = 0; n < nodes; n++)); do
  timeout 300 /usr/bin/python3 -m torch.distributed.run --nnodes "$nodes" \
    --node_rank "$n" --nproc_per_node "$per_node" --master_addr 127.0.0.1 \
    --master_port "$port" --no_python -r "$redirects" -t "$tees" \
    --log_dir "logs$n" "$@" > "agent$n.out" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
cat logs0/*/attempt_0/0/stdout.log
[ $status = 0 ] || cat agent*.out >&2
exit $status
