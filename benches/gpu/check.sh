#!/usr/bin/env bash
# A GPU check in minutes, on a CUDA machine with PyTorch 2.11 but no Rust toolchain: binaries built
# elsewhere, run from the repository root.
#
#   BIN=.gpu bash benches/gpu/check.sh [OUT]
#
# BIN holds `ono` and `xtask` (release or debug builds of this checkout); WHEELS (default .whl)
# may hold the PyTorch side's pinned packages as wheels (`xtask bench-compare` lists them), which
# are installed into a temporary folder. It prints, and writes under OUT (default ./gpu-out):
#   1. bench-compare on CUDA: ours against the PyTorch references, ONO and GNOT at the Darcy, NS2d
#      and Elasticity presets, FNO and the Galerkin Transformer at Darcy (bench-compare.{txt,json});
#   2. one training step of every other architecture on CUDA with its host-read count
#      (bench-step.jsonl);
#   3. `ono reproduce --profile smoke` on CUDA: every table's experiments, a few steps each
#      (smoke/report.md), resumable, under a time limit.
set -uo pipefail
BIN=${BIN:-.gpu}
WHEELS=${WHEELS:-.whl}
OUT=${1:-gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
TORCH_LIB=$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/ono-site "$WHEELS"/*.whl && export PYTHONPATH=/tmp/ono-site${PYTHONPATH:+:$PYTHONPATH}
fi
ONO="$BIN/ono"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
"$PY" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))' | tee -a "$OUT/machine.txt"
nproc | sed 's/^/cpu cores: /' | tee -a "$OUT/machine.txt"

echo "== 1. bench-compare on CUDA"
timeout "${COMPARE_S:-300}" "$BIN/xtask" bench-compare --ono "$ONO" --python "$(command -v "$PY")" \
    --device cuda --models ono,gnot,fno,galerkin --steps "${STEPS:-10}" \
    --json "$OUT/bench-compare.json" 2>&1 | tee "$OUT/bench-compare.txt"

echo "== 2. one training step of the other architectures on CUDA"
: >"$OUT/bench-step.jsonl"
for spec in "ufno darcy darcy" "ffno darcy darcy" "lsm darcy darcy" "transolver darcy darcy" \
    "transolver elasticity elasticity" "geofno elasticity elasticity" "fno3d plasticity plasticity" \
    "ono ns2d ns2d" "ono elasticity elasticity"; do
    set -- $spec
    timeout 60 "$ONO" bench-step --arch "$1" --preset "$2" --shapes "$3" --steps 5 --warmup 2 \
        --device cuda >>"$OUT/bench-step.jsonl" 2>"$OUT/bench-step.err" \
        || echo "{\"arch\": \"$1\", \"preset\": \"$2\", \"failed\": true}" >>"$OUT/bench-step.jsonl"
done
"$PY" - "$OUT/bench-step.jsonl" <<'EOF'
import json, sys
print(f"{'arch':<11} {'preset':<11} {'batch':>5} {'points':>7} {'median s':>9} {'params':>10} {'host reads':>10}")
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("failed"):
        print(f"{r['arch']:<11} {r['preset']:<11} FAILED")
        continue
    print(f"{r['arch']:<11} {r['preset']:<11} {r['batch']:>5} {r['points']:>7} {r['median_s']:>9.4f} {r['params']:>10} {r['host_reads']:>10}")
EOF

echo "== 3. the smoke profile on CUDA"
timeout "${SMOKE_S:-200}" "$ONO" reproduce --profile smoke --device cuda --out "$OUT/smoke" \
    >"$OUT/smoke.log" 2>&1
echo "reproduce exit: $?"
tail -n 5 "$OUT/smoke.log"
if [ -f "$OUT/smoke/report.md" ]; then
    grep -c '| done' "$OUT/smoke/report.md" | sed 's/^/experiments done: /'
fi
