#!/bin/sh
# Gathers what a GPU machine needs to run dt's GPU checks into BUILD/gpu: the test
# binaries, examples/gpt_tiny.dt compiled with its GPU code, every shared library
# they load beyond libc and the C++ runtime (the GPU machine runs another OS image,
# without OpenBLAS or Open MPI), the token shards, and in BUILD/gpu/golden what
# dt-cuda-fused-tests compares the generated kernels with (dt-fused-golden writes
# it here: it needs MLIR, which the GPU machine lacks). The CUDA runtime is linked
# statically; cuBLAS and the driver are the machine's. The folder goes as one
# xz archive (OpenBLAS alone is 36 MB; the device tool carries 64 MiB). Then:
#   run carry=["build/gpu.tar.xz"]
#       command="tar xJf build/gpu.tar.xz -C build && build/gpu/run-all.sh"
# (run-all.sh runs run-tests.sh, run-layers.sh, run-gpt-tiny.sh, run-sharded.sh and
# run-gpt2.sh, each under its own time limit, and leaves their logs in $OUT; a device
# call lasts at most 600 s, so run it as `run-all.sh tests layers gpt-tiny sharded`,
# then `run-all.sh gpt2 variants`: run-variants.sh compares GPT-2's product engines
# and its generated kernels' unrolling. `run-all.sh kernels` runs Nsight Compute on
# the hand-written kernels that GPT-2's profile puts first: run-kernel-profile.sh.)
set -eu
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$build/gpu"
rm -rf "$out" && mkdir -p "$out/golden" "$out/data"
"$build/bin/dt-fused-golden" "$out/golden" > /dev/null
DT_GPU=on "$build/bin/dtc" "$root/examples/gpt_tiny.dt" -o "$out/gpt_tiny"
# The same with bf16 activations: its products and attention take tensor cores.
sed -e 's/^  seed      = 1337$/&\n  precision = bf16/' "$root/examples/gpt_tiny.dt" \
  > "$out/gpt_tiny_bf16.dt"
grep -q "^  precision = bf16" "$out/gpt_tiny_bf16.dt"
DT_GPU=on "$build/bin/dtc" "$out/gpt_tiny_bf16.dt" -o "$out/gpt_tiny_bf16"
# The optimizer in host memory (offload = "optimizer"): its update runs on the CPU.
sed -e 's/^train gpt_tiny {$/parallel { offload = "optimizer" }\n&/' \
  "$root/examples/gpt_tiny.dt" > "$out/gpt_tiny_offload.dt"
grep -q 'offload = "optimizer"' "$out/gpt_tiny_offload.dt"
DT_GPU=on "$build/bin/dtc" "$out/gpt_tiny_offload.dt" -o "$out/gpt_tiny_offload"
DT_GPU=on "$build/bin/dtc" "$root/bench/gpt2_124m_gpu.dt" -o "$out/gpt2_124m_gpu"
# The benchmark at the largest micro-batch an 80 GB H100 holds (a 53 GiB arena), the
# issue's "largest micro-batch that fits"; 16 stays, to compare with earlier runs.
sed -e 's/^  batch     = 16$/  batch     = 64/' "$root/bench/gpt2_124m_gpu.dt" \
  > "$out/gpt2_124m_gpu_b64.dt"
grep -q "^  batch     = 64$" "$out/gpt2_124m_gpu_b64.dt"
DT_GPU=on "$build/bin/dtc" "$out/gpt2_124m_gpu_b64.dt" -o "$out/gpt2_124m_gpu_b64"
# The same with every generated kernel launched alone (run-variants.sh measures
# what launching small independent ones together is worth; --gpu-unroll=1's
# variant, one element a thread, measured 200 k against 224 k tokens/s on an
# H200 on 2026-11-28 and made way for this one).
DT_GPU=on "$build/bin/dtc" "$root/bench/gpt2_124m_gpu.dt" --gpu-merge=false \
  -o "$out/gpt2_124m_gpu_alone"
# LLaMA's layers (RMS norms, rotary embeddings, SwiGLU, grouped-query attention) and
# GPT-2's dropouts (residual and attention) on the GPU.
DT_GPU=on "$build/bin/dtc" "$root/examples/llama_tiny.dt" -o "$out/llama_tiny"
sed -e 's/nn.Block(width, heads)/nn.Block(width, heads, dropout_p = 0.1, attention_dropout_p = 0.1)/' \
  "$root/examples/gpt_tiny.dt" > "$out/gpt_tiny_dropout.dt"
grep -q "attention_dropout_p = 0.1" "$out/gpt_tiny_dropout.dt"
DT_GPU=on "$build/bin/dtc" "$out/gpt_tiny_dropout.dt" -o "$out/gpt_tiny_dropout"
# A CNN's convolutions, pooling and batch norms, on the first 2048 training and 512
# test images of Fashion-MNIST (the whole set would not fit the carry).
DT_GPU=on "$build/bin/dtc" "$root/examples/cnn_fashion.dt" -o "$out/cnn_fashion"
mkdir -p "$out/data/fashion"
python3 - "$root/data/fashion" "$out/data/fashion" <<'PY'
import gzip, struct, sys
src, dst = sys.argv[1], sys.argv[2]
for name, keep in [("train", 2048), ("t10k", 512)]:
    for kind, header in [("images-idx3", 16), ("labels-idx1", 8)]:
        data = gzip.open(f"{src}/{name}-{kind}-ubyte.gz").read()
        item = 784 if kind.startswith("images") else 1
        head = bytearray(data[:header])
        struct.pack_into(">I", head, 4, keep)
        with gzip.open(f"{dst}/{name}-{kind}-ubyte.gz", "wb") as f:
            f.write(bytes(head) + data[header:header + keep * item])
PY
cp -r "$root/data/text" "$out/data/"
# Sharded programs, whose ranks share the one GPU there (their collectives take the
# host engine: NCCL refuses ranks that share a GPU): data parallel with ZeRO-1 and
# ZeRO-3, and data x tensor parallel with vocabulary-parallel embeddings.
DT_GPU=on "$build/bin/dtc" "$root/../shared/spec/programs/mlp_fashion_dp.dt" -o "$out/mlp_fashion_dp"
# The contract's MLP on one GPU: run-gpt-tiny.sh checks its MFU against a hand count.
DT_GPU=on "$build/bin/dtc" "$root/../shared/spec/programs/mlp_fashion.dt" -o "$out/mlp_fashion"
DT_GPU=on "$build/bin/dtc" "$root/../shared/spec/programs/zero3_synthetic.dt" -o "$out/zero3_synthetic"
DT_GPU=on "$build/bin/dtc" "$root/examples/gpt_tp.dt" -o "$out/gpt_tp"
# The same ZeRO-3 step with its collectives beside the compute (a stream of their own).
DT_GPU=on "$build/bin/dtc" --overlap "$root/../shared/spec/programs/zero3_synthetic.dt" \
  -o "$out/zero3_overlap"
sed -e 's/^  zero = 3$/&\n  offload = "optimizer"/' \
  "$root/../shared/spec/programs/zero3_synthetic.dt" > "$out/zero3_offload.dt"
grep -q 'offload = "optimizer"' "$out/zero3_offload.dt"
DT_GPU=on "$build/bin/dtc" "$out/zero3_offload.dt" -o "$out/zero3_offload"
# Open MPI's launcher, relocated (OPAL_PREFIX; PMIx's plugins by their path): the GPU machine
# has none. Its plugins, PMIx's, and every library they load go in ompi/.
ompi="$out/ompi"
mkdir -p "$ompi/bin" "$ompi/lib/x86_64-linux-gnu/openmpi/lib" "$ompi/share" \
  "$ompi/pmix2/lib" "$ompi/libs"
cp /usr/bin/orterun /usr/bin/orted "$ompi/bin/"
cp -r /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 "$ompi/lib/x86_64-linux-gnu/openmpi/lib/"
cp -r /usr/share/openmpi "$ompi/share/"
cp -r /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix "$ompi/pmix2/lib/"
cp -r /usr/lib/x86_64-linux-gnu/pmix2/share "$ompi/pmix2/"
for so in "$ompi"/bin/* "$ompi"/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so \
    "$ompi"/pmix2/lib/pmix/*.so; do
  ldd "$so" 2>/dev/null | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
    *) cp -L "$lib" "$ompi/libs/" ;;
  esac
done
cp "$root/scripts/compare-losses.py" "$root/bench/run_gpt2_gpu.py" \
   "$root/bench/gpt2_torch_gpu.py" "$out/"
for binary in dt-cuda-kernel-tests dt-cuda-fused-tests dt-cuda-comm-tests dt-cuda-executor-tests \
    mlp_fashion gpt_tiny gpt_tiny_bf16 \
    gpt_tiny_offload gpt2_124m_gpu llama_tiny gpt_tiny_dropout cnn_fashion mlp_fashion_dp \
    zero3_synthetic zero3_overlap zero3_offload gpt_tp; do
  [ -f "$out/$binary" ] || cp "$build/bin/$binary" "$out/"
  ldd "$out/$binary" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
      *) [ -f "$out/$(basename "$lib")" ] || cp -L "$lib" "$out/" ;;
    esac
  done
done
cat > "$out/find-libs.sh" <<'RUN'
# Sourced by the run scripts: the GPU machine's NCCL and cuDNN are Python wheels'
# (nvidia-nccl-cu13, nvidia-cudnn-cu13, beside torch) unless the toolkit has them.
# cuDNN opens its engines' libraries and NVRTC by name: its folder and the
# toolkit's go on the loader's path.
wheel() { python3 -c "import nvidia.$1 as n; print(list(n.__path__)[0])" 2>/dev/null || true; }
if [ -z "${DT_NCCL_LIBRARY:-}" ]; then
  w=$(wheel nccl)
  [ -n "$w" ] && [ -f "$w/lib/libnccl.so.2" ] && export DT_NCCL_LIBRARY="$w/lib/libnccl.so.2"
fi
if [ -z "${DT_CUDNN_LIBRARY:-}" ]; then
  w=$(wheel cudnn)
  if [ -n "$w" ] && [ -f "$w/lib/libcudnn.so.9" ]; then
    export DT_CUDNN_LIBRARY="$w/lib/libcudnn.so.9"
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$w/lib"
  fi
fi
w=$(wheel cuda_nvrtc)
for dir in ${w:+"$w/lib"} /usr/local/cuda/lib64; do
  if [ -d "$dir" ]; then export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir"; fi
done
RUN
cat > "$out/run-tests.sh" <<'RUN'
#!/bin/sh
# dt's GPU tests, where this folder was carried to.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=".${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" DT_FUSED_GOLDEN="$PWD/golden"
. ./find-libs.sh
echo "NCCL: ${DT_NCCL_LIBRARY:-the loader's libnccl.so.2}"
echo "cuDNN: ${DT_CUDNN_LIBRARY:-the loader's libcudnn.so.9}"
# A kernel that hangs fails its run instead of spending the device time.
limit=${TEST_TIMEOUT:-300}
status=0
timeout "$limit" ./dt-cuda-kernel-tests "$@" || status=1
timeout "$limit" ./dt-cuda-fused-tests || status=1
timeout "$limit" ./dt-cuda-executor-tests || status=1
# NCCL over one rank, and the host engine.
timeout "$limit" ./dt-cuda-comm-tests || status=1
exit $status
RUN
cat > "$out/run-gpt-tiny.sh" <<'RUN'
#!/bin/sh
# examples/gpt_tiny.dt for STEPS (50) steps on the GPU and on the CPU, from the
# same initialisation and batches; the losses must agree within 1e-3 relative.
# Then its bf16 twin, whose GPU products and attention run on bf16 tensor cores:
# within 5e-3 (what test/e2e/precision.test allows bf16 against f32 on the CPU).
# And its twin with the optimizer in host memory (offload = "optimizer": the update
# runs on the CPU between the copies), within 1e-3.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=".${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
. ./find-libs.sh
steps=${STEPS:-50}
rm -rf runs ckpt
status=0
for program in gpt_tiny gpt_tiny_bf16 gpt_tiny_offload; do
  for backend in cuda cpu; do
    timeout 300 ./$program --backend $backend --steps "$steps" --log-every 1 --eval-every 0 \
      --checkpoint-every 0 --checkpoint-dir "ckpt/$program-$backend" \
      --log-dir "runs/$program-$backend" || exit 1
  done
done
python3 compare-losses.py runs/gpt_tiny-cuda/metrics.jsonl runs/gpt_tiny-cpu/metrics.jsonl 1e-3 || status=1
python3 compare-losses.py runs/gpt_tiny_bf16-cuda/metrics.jsonl runs/gpt_tiny_bf16-cpu/metrics.jsonl 5e-3 || status=1
python3 compare-losses.py runs/gpt_tiny_offload-cuda/metrics.jsonl runs/gpt_tiny_offload-cpu/metrics.jsonl 1e-3 || status=1
# A trace of steps 2:3 on the GPU: the launches of every op with a span are "kernel"
# events of the GPU stream (tid 3), inside their steps; the start-up lines name the
# measured peaks beside the datasheet's.
timeout 120 ./gpt_tiny --backend cuda --steps 3 --eval-every 0 --checkpoint-every 0 \
  --checkpoint-dir ckpt/trace --log-dir runs/trace --trace runs/trace-gpu \
  --trace-steps 2:3 > runs/trace.txt || status=1
grep "peak:" runs/trace.txt || { echo "no peak line"; status=1; }
# MFU on the GPU: each record's mfu times the datasheet peak it divides by (the
# start-up line's) times the step's time gives back the model's FLOPs a step,
# counted by hand within 2 %: gpt_tiny's 6N + 6LCT a token (llm.c's count) and the
# MLP's products forward and backward plus AdamW's update (test/e2e/trace/mfu.test).
timeout 60 ./mlp_fashion --backend cuda --steps 40 --log-every 20 --eval-every 0 \
  --checkpoint-every 0 --checkpoint-dir ckpt/mlp --log-dir runs/mlp > runs/mlp.txt || status=1
python3 - runs/trace.txt runs/gpt_tiny-cuda/metrics.jsonl runs/mlp.txt runs/mlp/metrics.jsonl <<'PY' || status=1
import json, re, sys
n = 842496
b = 128
mm = 2 * b * (784 * 256 + 256 * 10)
hands = [(6 * n + 6 * 4 * 128 * 128) * 32 * 128,
         3 * mm - 2 * b * 784 * 256 + 15 * (784 * 256 + 256 + 256 * 10 + 10)]
ok = True
for (out, metrics), hand in zip([sys.argv[1:3], sys.argv[3:5]], hands):
    peak = float(re.search(r"datasheet ([0-9.]+), MFU's denominator", open(out).read()).group(1)) * 1e12
    records = [json.loads(l) for l in open(metrics) if '"mfu"' in l]
    worst = max(abs(r["mfu"] * peak * r["step_time_s"] / hand - 1) for r in records)
    print(f"MFU by hand, {metrics}: {len(records)} records, worst {100 * worst:.2f} % off {hand:.4g} FLOPs a step")
    ok &= bool(records) and worst < 0.02
sys.exit(0 if ok else 1)
PY
python3 - runs/trace-gpu/rank_0.pt.trace.json <<'PY' || status=1
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
kernels = [e for e in events if e.get("cat") == "kernel"]
steps = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
assert kernels and all(e["tid"] == 3 and "op_id" in e["args"] for e in kernels), "no GPU kernels"
inside = sum(any(s["ts"] <= k["ts"] and k["ts"] + k["dur"] <= s["ts"] + s["dur"] + 1 for s in steps) for k in kernels)
print(f"GPU trace: {len(kernels)} kernel spans, {inside} inside their steps, "
      f"{sum(k['dur'] for k in kernels) / 1e3:.2f} ms of GPU time")
assert inside == len(kernels), "GPU spans outside their steps"
PY
exit $status
RUN
cat > "$out/run-layers.sh" <<'RUN'
#!/bin/sh
# examples/llama_tiny.dt, gpt_tiny with both dropouts at 0.1 and examples/cnn_fashion.dt,
# STEPS (16) steps on the GPU and on the CPU from the same initialisation and batches:
# the GPU's RMS norm, rotary embedding, dropout (the CPU's masks), convolution and
# pooling kernels and its batch norms give the CPU's losses within 1e-3 relative.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=".${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
. ./find-libs.sh
steps=${STEPS:-16}
status=0
mkdir -p runs
for program in llama_tiny gpt_tiny_dropout cnn_fashion; do
  for backend in cuda cpu; do
    timeout 300 ./$program --backend $backend --steps "$steps" --log-every 1 --eval-every 0 \
      --checkpoint-every 0 --checkpoint-dir "ckpt/$program-$backend" \
      --log-dir "runs/$program-$backend" > "runs/$program-$backend.txt" || { tail -5 "runs/$program-$backend.txt"; status=1; }
  done
  python3 compare-losses.py runs/$program-cuda/metrics.jsonl runs/$program-cpu/metrics.jsonl 1e-3 || status=1
done
exit $status
RUN
cat > "$out/run-sharded.sh" <<'RUN'
#!/bin/sh
# Sharded programs on this one GPU: 4 ranks each (the carried Open MPI starts them),
# sharing it, so --collectives auto takes the host engine and says why (NCCL refuses
# ranks that share a GPU); STEPS (8) steps on the GPU and on the CPU from the same
# initialisation and batches give the same losses within 1e-3 relative: the GPU
# plan's collectives, shards, block starts and vocabulary-parallel kernels (gpt_tp),
# asynchronous collectives on a stream of their own (zero3_overlap), and each rank's
# optimizer in host memory (zero3_offload).
# Then --collectives nccl must stop with a message, not hang.
cd "$(dirname "$0")"
here=$PWD
export LD_LIBRARY_PATH="$here:$here/ompi/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
. ./find-libs.sh
export OPAL_PREFIX="$here/ompi" PMIX_PREFIX="$here/ompi/pmix2" \
  PMIX_MCA_mca_base_component_path="$here/ompi/pmix2/lib/pmix"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A command, not a function: `timeout` runs commands.
mpirun="$here/ompi/bin/orterun -n 4 --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none"
steps=${STEPS:-8}
status=0
mkdir -p runs
for program in mlp_fashion_dp zero3_synthetic zero3_overlap zero3_offload gpt_tp; do
  for backend in cuda cpu; do
    timeout 120 $mpirun ./$program --backend $backend --steps "$steps" --log-every 1 \
      --eval-every 0 --checkpoint-every 0 --checkpoint-dir "ckpt/$program-$backend" \
      --log-dir "runs/$program-$backend" > "runs/$program-$backend.txt" 2>&1 \
      || { tail -5 "runs/$program-$backend.txt"; status=1; }
  done
  head -3 "runs/$program-cuda.txt"
  python3 compare-losses.py runs/$program-cuda/metrics.jsonl runs/$program-cpu/metrics.jsonl 1e-3 || status=1
done
if timeout 60 $mpirun ./mlp_fashion_dp --backend cuda --collectives nccl --steps 1 \
    --checkpoint-every 0 --checkpoint-dir ckpt/nccl --log-dir runs/nccl > runs/nccl.txt 2>&1; then
  echo "--collectives nccl with ranks sharing a GPU did not fail"; status=1
elif ! grep -q "which NCCL refuses" runs/nccl.txt; then
  echo "--collectives nccl failed without saying why:"; tail -5 runs/nccl.txt; status=1
fi
exit $status
RUN
cat > "$out/run-gpt2.sh" <<'RUN'
#!/bin/sh
# The GPU benchmark: GPT-2 124M (bf16, 16 x 1024 tokens a step; BATCH=64 the
# program built for 64) by dt and by PyTorch on this GPU (bench/run_gpt2_gpu.py).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=".${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
. ./find-libs.sh
batch=${BATCH:-16}
program=./gpt2_124m_gpu
[ "$batch" = 16 ] || program="./gpt2_124m_gpu_b$batch"
python3 run_gpt2_gpu.py "$program" --steps "${STEPS:-30}" --batch "$batch"
RUN
cat > "$out/run-gpt2-profile.sh" <<'RUN'
#!/bin/sh
# Where a GPT-2 step's GPU time goes: every launch timed (DTRT_CUDA_PROFILE=1).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=".${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
. ./find-libs.sh
# (It ends with a checkpoint, which a second run would refuse to overwrite.)
rm -rf ckpt/profile
DTRT_CUDA_PROFILE=1 ./gpt2_124m_gpu --backend cuda --steps "${STEPS:-4}" \
  --log-every 1 --checkpoint-every 0 --checkpoint-dir ckpt/profile \
  --log-dir runs/profile
RUN
cat > "$out/run-kernel-profile.sh" <<'RUN'
#!/bin/sh
# Nsight Compute (ncu, on the GPU machine's image) on one launch each of GPT-2's
# hand-written kernels that the profile puts first: attention's three and its
# gradient's row statistics, the layer norm's input gradient and the
# embedding's gradient. Each report (speed of light,
# occupancy, warp stalls, instruction mix and the source lines the stalls sample)
# goes to ncu-KERNEL.txt in $OUT, else logs/. Launches run eagerly, outside graphs,
# and attention on dt's kernels (not cuDNN's).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=".${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
. ./find-libs.sh
logs=${OUT:-logs}
mkdir -p "$logs"
status=0
for kernel in forwardKernel queryGradKernel keyGradKernel attentionRowStats \
    layerNormGradWarps embeddingGradShared; do
  rm -rf ckpt/ncu
  DTRT_CUDA_GRAPHS=0 DTRT_CUDA_ATTENTION=dt timeout 120 ncu --set full --kernel-name "regex:$kernel" \
    --launch-count 1 ./gpt2_124m_gpu --backend cuda --steps 1 --checkpoint-every 0 \
    --checkpoint-dir ckpt/ncu --log-dir runs/ncu > "$logs/ncu-$kernel.txt" 2>&1 || status=1
  grep -E "Duration|Registers Per|Achieved Occupancy|Executed Ipc A" "$logs/ncu-$kernel.txt" \
    | sed "s/^/$kernel: /"
done
exit $status
RUN
cat > "$out/run-variants.sh" <<'RUN'
#!/bin/sh
# GPT-2 in variants, each measured beside the others: its products by each
# engine (DTRT_CUDA_PRODUCTS: cuBLAS's classic API, cuBLASLt's heuristic,
# cuBLASLt timed: the default), and its generated kernels each launched alone
# (dtc --gpu-merge=false) against small independent ones together, and its
# attention on dt's kernels instead of cuDNN's (DTRT_CUDA_ATTENTION=dt), those
# loading each tile once the last is done
# (DTRT_CUDA_ATTENTION_PIPELINE=0) or with warps of 16 query rows
# (DTRT_CUDA_ATTENTION_WARP_ROWS=16). The same losses within rounding, and the
# tokens/s of each.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=".${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
. ./find-libs.sh
status=0
variant() {  # NAME PROGRAM ENGINE [ATTENTION_PIPELINE [WARP_ROWS [ATTENTION]]]
  rm -rf "ckpt/variant-$1"
  DTRT_CUDA_PRODUCTS=$3 DTRT_CUDA_ATTENTION_PIPELINE=${4:-1} \
    DTRT_CUDA_ATTENTION_WARP_ROWS=${5:-32} DTRT_CUDA_ATTENTION=${6:-auto} \
    "./$2" --backend cuda --steps "${STEPS:-10}" \
    --log-every 5 --eval-every 0 --checkpoint-every 0 \
    --checkpoint-dir "ckpt/variant-$1" --log-dir "runs/variant-$1" \
    > "runs-variant-$1.txt" 2>&1 || status=1
  echo "== $1"; grep -E "^(note|step|done)|error" "runs-variant-$1.txt" | tail -4
}
variant cublas gpt2_124m_gpu cublas
variant lt gpt2_124m_gpu lt
variant tuned gpt2_124m_gpu tuned
variant tuned-kernels-alone gpt2_124m_gpu_alone tuned
variant tuned-attention-dt gpt2_124m_gpu tuned 1 32 dt
variant tuned-attention-unpipelined gpt2_124m_gpu tuned 0 32 dt
variant tuned-attention-16-rows gpt2_124m_gpu tuned 1 16 dt
exit $status
RUN
cat > "$out/run-all.sh" <<'RUN'
#!/bin/sh
# Every check, in order of what a short GPU session must not miss: the kernels
# against their CPU twins, the newer layers' losses, gpt_tiny's, then the GPT-2
# benchmark. Each part has its own time limit and the script goes on after a
# failure; the summary names what failed. Logs go to $OUT (the device tool's
# folder) when it is set, else to logs/.
cd "$(dirname "$0")"
logs=${OUT:-logs}
mkdir -p "$logs"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
  > "$logs/gpu.txt" 2>&1
failed=""
run() {  # NAME SECONDS COMMAND...
  name=$1 limit=$2
  shift 2
  start=$(date +%s)
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1 || failed="$failed $name"
  echo "$name: $(( $(date +%s) - start )) s" | tee -a "$logs/summary.txt"
  tail -n 3 "$logs/$name.log"
}
# `run-all.sh PART...` runs those parts only (a device call lasts at most 600 s:
# `run-all.sh tests layers gpt-tiny sharded`, then `run-all.sh gpt2`).
parts=${*:-tests layers gpt-tiny sharded gpt2}
for part in $parts; do
  case $part in
    tests) run tests 120 ./run-tests.sh ;;
    layers) run layers 150 ./run-layers.sh ;;
    gpt-tiny) run gpt-tiny 150 ./run-gpt-tiny.sh ;;
    sharded) run sharded 150 ./run-sharded.sh ;;
    gpt2) run gpt2 200 ./run-gpt2.sh ;;
    gpt2-b64) run gpt2-b64 240 env BATCH=64 STEPS="${STEPS:-20}" ./run-gpt2.sh ;;
    variants) run variants 280 ./run-variants.sh ;;
    kernels) run kernels 400 ./run-kernel-profile.sh ;;
    *) echo "unknown part '$part'"; failed="$failed $part" ;;
  esac
done
echo "failed:${failed:- none}" | tee -a "$logs/summary.txt"
[ -z "$failed" ]
RUN
chmod +x "$out/run-tests.sh" "$out/run-gpt-tiny.sh" "$out/run-gpt2.sh" \
  "$out/run-variants.sh" "$out/run-gpt2-profile.sh" "$out/run-kernel-profile.sh" "$out/run-layers.sh" "$out/run-sharded.sh" "$out/run-all.sh"
# One dictionary over the whole folder (256 MiB, xz's default is 8): the programs
# share most of their bytes (the runtime and the kernels), and a window that
# holds them all stores them about once (37 MB instead of 67).
tar cf "$build/gpu.tar" -C "$build" gpu
xz -f --lzma2=preset=6,dict=256MiB "$build/gpu.tar"
du -sh "$out" "$build/gpu.tar.xz"
