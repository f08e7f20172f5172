#!/bin/sh
# Gathers what a GPU machine needs to run dt's GPU tests into BUILD/gpu: the test
# binaries and every shared library they load beyond libc and the C++ runtime (the
# GPU machine runs another OS image, without OpenBLAS). The CUDA runtime is linked
# statically; the driver is the machine's. Then, with the device tool:
#   run carry=["build/gpu"] command="cd build/gpu && LD_LIBRARY_PATH=. ./dt-cuda-kernel-tests"
set -eu
build=${1:-build}
out="$build/gpu"
rm -rf "$out" && mkdir -p "$out"
for test in dt-cuda-kernel-tests; do
  cp "$build/bin/$test" "$out/"
  ldd "$build/bin/$test" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
      *) cp -L "$lib" "$out/" ;;
    esac
  done
done
du -sh "$out"
