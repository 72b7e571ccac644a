#!/bin/sh
# bench/scripts/gpu_bench.sh: the GPU benchmark in one go: kernel-only figures and copy bandwidth
# (build/bench/gpu_kbench, built here with nvcc), then end to end through the plugin vs the default
# provider and the project's CPU engine (build/bench/gpu_bench): CTR both ways (keystream + CPU XOR,
# and staged in/out), several callers on 2 and 4 slots, the host team's copy / XOR rate alone.
# Every output is checked against OpenSSL; a mismatch makes the script exit non-zero.
# usage: bench/scripts/gpu_bench.sh [PLUGIN=build/accelaes-cuda.so] [MiB=256]
set -u
cd "$(dirname "$0")/../.."
PLUGIN=${1:-build/accelaes-cuda.so}
MIB=${2:-256}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
mkdir -p build/bench
# Built once, or when its sources changed (GPU_BENCH_REBUILD=1 forces it): a machine that only runs it
# (carried build/) may lack nvcc and the OpenSSL headers.
if [ ! -x build/bench/gpu_kbench ] || [ "${GPU_BENCH_REBUILD:-0}" = 1 ] \
   || { [ -x "$NVCC" ] && [ -n "$(find bench/src/gpu_bench_kernels.cu accel/cuda/kernels.cu -newer build/bench/gpu_kbench)" ]; }; then
  if [ -x "$NVCC" ]; then
    "$NVCC" -O3 -std=c++17 -I. $ARCH -o build/bench/gpu_kbench bench/src/gpu_bench_kernels.cu accel/cuda/kernels.cu -lcrypto || exit 2
  else
    echo "gpu_bench: nvcc not found: kernel-only figures skipped"
  fi
fi
[ -x build/bench/gpu_bench ] || make -s build/bench/gpu_bench || exit 2
rc=0
echo "== kernel-only and copy bandwidth =="
if [ -x build/bench/gpu_kbench ]; then build/bench/gpu_kbench "$MIB" || rc=1; fi
echo "== end to end through $PLUGIN (CTR: GPU keystream, CPU XOR) =="
build/bench/gpu_bench "$PLUGIN" ctr,ecb,cbcdec,cbcenc,conc,host "$MIB" || rc=1
echo "== end to end, CTR staged in and out (ACCELAES_CUDA_CTR=full) =="
ACCELAES_CUDA_CTR=full build/bench/gpu_bench "$PLUGIN" ctr "$MIB" || rc=1
echo "== several callers, 4 slots (ACCELAES_CUDA_SLOTS=4) =="
ACCELAES_CUDA_SLOTS=4 build/bench/gpu_bench "$PLUGIN" conc "$MIB" || rc=1
exit $rc
