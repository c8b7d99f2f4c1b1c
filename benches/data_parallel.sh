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
# EPOCHS (default 4: the first is left out as warm-up), ARCHS (default "ono fno2d": ONO's NS2d
# preset at 4 layers of width 64, FNO-2D's Darcy preset), on a generated Darcy set. Prints one
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
# 512 training samples on a 17×17 grid (solved at 33×33; at this coarse size some seeds draw a
# coefficient whose operator is indefinite and the generator refuses them: seed 4 does not).
NTRAIN=512
[ -f "$OUT/darcy.safetensors" ] || "$ONO" data darcy --n-train $NTRAIN --n-test 32 --res 33 --stride 2 \
    --seed 4 --out "$OUT/darcy.safetensors" >/dev/null
experiment() { # name arch threads
    local model
    case $2 in
        # The NS2d preset (linear attention) with 4 layers of width 64: a few steps per second
        # on a 2-core CPU. (The Darcy preset's Nyström attention takes 14 s per step at this
        # size there; docs/benchmarks.md.)
        ono) model='preset = "ns2d"
[model.overrides]
n_layers = 4
n_hidden = 64' ;;
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
    "$PY" - "$OUT/$1/metrics.jsonl" "$NTRAIN" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
secs = sum(r["seconds"] for r in rows[1:])
print(f"{int(sys.argv[2]) * (len(rows) - 1) / secs:.1f}")
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
