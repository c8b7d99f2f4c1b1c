#!/bin/bash
# Peak memory per process and time per step of point-sharded training (docs/benchmarks.md,
# "Point sharding"): ONO's Elasticity preset with the linear-transformer block on one sample of
# N scattered 2-D points, over P processes (torchrun, Gloo, 1 thread each), for every N and P
# given. One `ono bench-train` JSON line per process.
#
#   eval "$(cargo xtask env)"; cargo build --release -p ono-cli --bin ono
#   bash benches/point_sharding/run.sh OUT "16384 32768 65536 131072" "1 2 4"
set -euo pipefail
OUT=$(realpath -m "$1"); NS=$2; PS=$3
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$HERE/../../target/release}/ono
mkdir -p "$OUT" && cd "$OUT"
python3 "$HERE/make_data.py" $NS
for N in $NS; do for P in $PS; do
  cat > run-$N-$P.toml <<TOML
seed = 1
epochs = 1
batch_size = 1
threads = 1
output_dir = "out-$N-$P"
parallel = "points"
[model]
arch = "ono"
preset = "elasticity"
[model.overrides]
nn_block = "linear_transformer"
[data]
path = "points-$N.safetensors"
ntrain = 1
ntest = 1
TOML
  echo "== N=$N P=$P"
  if [ "$P" = 1 ]; then
    OMP_NUM_THREADS=1 "$BIN" bench-train run-$N-$P.toml --steps 2 --warmup 1
  else
    OMP_NUM_THREADS=1 torchrun --nproc-per-node "$P" --master-addr 127.0.0.1 \
      --master-port $((20000 + RANDOM % 20000)) --no-python "$BIN" bench-train run-$N-$P.toml \
      --steps 2 --warmup 1 2>/dev/null | grep '^{'
  fi
done; done
