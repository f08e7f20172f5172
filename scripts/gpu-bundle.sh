#!/bin/sh
# Gathers what a GPU machine needs to run dt's GPU tests into BUILD/gpu: the test
# binaries, every shared library they load beyond libc and the C++ runtime (the
# GPU machine runs another OS image, without OpenBLAS), and in BUILD/gpu/golden
# what dt-cuda-fused-tests compares the generated kernels with (dt-fused-golden
# writes it here: it needs MLIR, which the GPU machine lacks). The CUDA runtime is
# linked statically; the driver is the machine's. Then, with the device tool:
#   run carry=["build/gpu"] command="cd build/gpu && ./run-tests.sh"
set -eu
build=${1:-build}
out="$build/gpu"
rm -rf "$out" && mkdir -p "$out/golden"
"$build/bin/dt-fused-golden" "$out/golden" > /dev/null
for test in dt-cuda-kernel-tests dt-cuda-fused-tests; do
  cp "$build/bin/$test" "$out/"
  ldd "$build/bin/$test" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
      *) cp -L "$lib" "$out/" ;;
    esac
  done
done
cat > "$out/run-tests.sh" <<'RUN'
#!/bin/sh
# Runs dt's GPU tests where this folder was carried to.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=".${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" DT_FUSED_GOLDEN="$PWD/golden"
status=0
./dt-cuda-kernel-tests || status=1
./dt-cuda-fused-tests || status=1
exit $status
RUN
chmod +x "$out/run-tests.sh"
du -sh "$out"
