# lit configuration for dt: dialect and pass tests (dt-opt), driver tests (dtc) and
# end-to-end trainings of emitted programs.
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "dt"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".dt", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "fuzz"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dt_obj_root, "test")

llvm_config.with_system_environment(["HOME", "TMPDIR", "OMPI_ALLOW_RUN_AS_ROOT",
                                     "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"])
llvm_config.use_default_substitutions()  # FileCheck, not, count, split-file from llvm_tools_dir
llvm_config.with_environment("PATH", config.dt_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# Programs are built without GPU code (its PTX doubles a compile), except where a
# test asks for it with dtc --gpu=auto|on (test/dtc/gpu-plan.test, test/e2e/gpu).
config.environment["DT_GPU"] = "off"
# The peaks the programs measure (and dtc --report reads) are cached in the build tree,
# not in the user's ~/.cache/dt: tests see the same cache whoever runs them; tests of
# the cache itself name their own DT_CACHE_DIR.
config.environment["DT_CACHE_DIR"] = os.path.join(config.test_exec_root, "dt-cache")

config.substitutions.append(("%src_root", config.dt_src_root))
config.substitutions.append(("%data", os.path.join(config.dt_src_root, "data")))
config.substitutions.append(("%spec", config.dt_spec_dir))
config.substitutions.append(("%python", "/usr/bin/python3"))
# Helpers for tests that run emitted programs (data files, metrics, signals, checkpoints).
config.substitutions.append(
    ("%dtrt_test", "/usr/bin/python3 " +
     os.path.join(config.dt_src_root, "test", "e2e", "runtime", "Inputs", "dtrt_test.py")))

# Features a test can REQUIRE.
if os.path.isdir(config.dt_spec_dir):
    config.available_features.add("spec")
if os.path.exists(os.path.join(config.dt_src_root, "data", "fashion", "train-images-idx3-ubyte.gz")):
    config.available_features.add("fashion-data")
if os.path.exists(os.path.join(config.dt_src_root, "data", "text", "train.bin")):
    config.available_features.add("text-data")
# MPI: sharded programs run on several ranks. %mpirun is plain OpenMPI with what a
# container and a small machine need (root allowed, more ranks than cores, no
# single-copy shared memory); dtrun sets the same itself.
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
                    "--oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none"))
def _has_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=20).returncode == 0
    except Exception:
        return False
if _has_gpu():
    config.available_features.add("cuda")
# The CUDA toolkit's assembler checks the PTX dtc generates; no GPU needed.
# The AWS CLI validates a CreateTrainingJob request offline (against its service
# model) before it tries to connect.
if shutil.which("aws"):
    config.available_features.add("awscli")
# Headless Chromium (Debian's chromium, which scripts/setup.sh installs) renders the
# run report in a real browser.
_chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if _chromium:
    config.available_features.add("chromium")
    config.substitutions.append(("%chromium", _chromium))
_ptxas = shutil.which("ptxas") or (
    "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
if _ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", _ptxas))
