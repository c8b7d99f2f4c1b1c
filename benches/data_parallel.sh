#!/usr/bin/env bash
# Data-parallel throughput: one process with P torch threads against P processes of one thread
# each (`torchrun --no-python --nproc-per-node P ono train`; Gloo on the CPU), the same experiment,
# the same batch per step, the same total threads. With DEVICE=cuda and PROCS=1 it measures the
# NCCL path at world size 1 against plain training (benches/gpu/check.sh section 8). Run from the
# repository root:
#
#   BIN=target/release bash benches/data_parallel.sh [OUT]
#
# BIN holds a release `ono` (`cargo build --release -p ono-cli --bin ono`); the launcher is
# TORCHRUN (a command, e.g. "python3 -m torch.distributed.run"), else torchrun from PATH
# (`eval "$(cargo xtask env)"` puts the xtask's venv there). DEVICE (default cpu), PROCS (default 2),
# EPOCHS (default 4: the first is left out as warm-up), ARCHS (default "ono fno2d"). Prints one
# line per architecture and launch: training samples per second over epochs 2..EPOCHS (the epochs'
# own seconds from metrics.jsonl: start-up, evaluation and checkpoints excluded), and writes
# summary.txt under OUT (default dp-out).
set -euo pipefail
BIN=${BIN:-target/release}
ONO=$(cd "$BIN" && pwd)/ono
TORCHRUN=${TORCHRUN:-torchrun}
PROCS=${PROCS:-2}
DEVICE=${DEVICE:-cpu}
EPOCHS=${EPOCHS:-4}
ARCHS=${ARCHS:-ono fno2d}
OUT=${1:-dp-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
[ -f "$OUT/darcy.safetensors" ] || "$ONO" data darcy --n-train 256 --n-test 32 --res 33 --stride 2 \
    --seed 1 --out "$OUT/darcy.safetensors" >/dev/null
experiment() { # name arch threads
    local model
    case $2 in
        ono) model='preset = "darcy"' ;;
        *) model="arch = \"$2\"
preset = \"darcy\"" ;;
    esac
    rm -rf "$OUT/$1"
    cat > "$OUT/$1.toml" <<TOML
seed = 0
epochs = $EPOCHS
batch_size = 16
threads = $3
device = "$DEVICE"
output_dir = "$1"

[model]
$model

[data]
path = "darcy.safetensors"

[log]
panels = 0
eval_every_epochs = $EPOCHS
TOML
}
rate() { # name → samples/s over epochs 2..
    "$PY" - "$OUT/$1/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
secs = sum(r["seconds"] for r in rows[1:])
print(f"{256 * (len(rows) - 1) / secs:.1f}")
PY
}
: > "$OUT/summary.txt"
for arch in $ARCHS; do
    experiment "one-$arch" "$arch" "$PROCS"
    (cd "$OUT" && OMP_NUM_THREADS=$PROCS "$ONO" train "one-$arch.toml" --quiet >/dev/null)
    experiment "dp-$arch" "$arch" 1
    (cd "$OUT" && OMP_NUM_THREADS=1 $TORCHRUN --nproc-per-node "$PROCS" --no-python "$ONO" train \
        "dp-$arch.toml" --quiet >/dev/null 2>"$OUT/dp-$arch.log")
    one=$(rate "one-$arch"); dp=$(rate "dp-$arch")
    echo "$arch on $DEVICE: 1 process × $PROCS threads $one samples/s; $PROCS processes × 1 thread $dp samples/s" \
        | tee -a "$OUT/summary.txt"
done
