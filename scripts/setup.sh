#!/usr/bin/env bash
# Sets up a fresh Debian 12 (bookworm) machine for dt, safely re-runnable:
#   1. installs the Debian packages the project needs (only those missing),
#   2. lays out the data sets the contract programs name (data/fashion, data/text),
#   3. configures and builds the project into build/ (build/bin/dtc, dt-opt, ...).
# Flags: --bench also installs hyperfine for bench/; --no-build skips step 3.
set -euo pipefail
cd "$(dirname "$0")/.."

want_bench=0 build=1
for arg in "$@"; do
  case "$arg" in
    --bench) want_bench=1 ;;
    --no-build) build=0 ;;
    *) echo "setup.sh: unknown flag '$arg' (known: --bench, --no-build)" >&2; exit 2 ;;
  esac
done

packages=(
  # toolchain: MLIR/LLVM 19 (mlir-tblgen, lit and FileCheck come from the -tools packages)
  cmake ninja-build clang-19 lld-19 libclang-rt-19-dev libfuzzer-19-dev
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  # front end
  antlr4 libantlr4-runtime-dev default-jre-headless
  # libraries
  libfmt-dev libgtest-dev libgmock-dev nlohmann-json3-dev zlib1g-dev libboost-dev
  libopenblas-dev libopenblas0-pthread libopenmpi-dev openmpi-bin
  # dt-tokenize: SentencePiece models, and ICU for tokenizer.json's Unicode rules
  libsentencepiece-dev sentencepiece libicu-dev pkg-config
  # data
  dataset-fashion-mnist fortunes python3
  # tests: the AWS CLI checks packaged SageMaker requests offline; jq runs in their
  # entry points; PyTorch (NumPy, torchvision) is the oracle of the Hugging Face weight tests;
  # crc32c checks TensorBoard's event files independently of the runtime
  awscli jq python3-torch python3-torchvision python3-numpy python3-crc32c
  # headless Chromium renders the run report (docs/operations.md) in its test
  chromium
  # dt-tokenize's references: python3-sentencepiece here, Hugging Face's JavaScript
  # tokenizers from npm below
  python3-sentencepiece
)
# Node.js runs the JavaScript reference; the machine image usually has it.
command -v npm > /dev/null || packages+=(nodejs npm)
if [ "$want_bench" = 1 ]; then packages+=(hyperfine); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Data: the contract programs name data/fashion/*.gz and data/text/{train,val}.bin.
mkdir -p data/fashion data/text
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz \
         t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  ln -sfn "/usr/share/datasets/fashion-mnist/$f" "data/fashion/$f"
done
if [ ! -s data/text/train.bin ] || [ ! -s data/text/val.bin ]; then
  /usr/bin/python3 scripts/make_text_shards.py /usr/share/games/fortunes data/text
fi

# The reference tokenizers of test/tokenize (pinned by its package-lock.json).
refs=test/tokenize/Inputs
if [ ! -f "$refs/node_modules/.package-lock.json" ] ||
   ! cmp -s "$refs/package-lock.json" "$refs/node_modules/.dt-installed-lock.json"; then
  (cd "$refs" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$refs/package-lock.json" "$refs/node_modules/.dt-installed-lock.json"
fi

if [ "$build" = 1 ]; then
  if [ ! -f build/build.ninja ]; then
    cmake -G Ninja -S . -B build \
      -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
      -DLLVM_USE_LINKER=lld
  fi
  cmake --build build
fi
