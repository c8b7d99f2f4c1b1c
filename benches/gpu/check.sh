#!/usr/bin/env bash
# A GPU check in minutes, on a CUDA machine with PyTorch 2.11 but no Rust toolchain: binaries built
# elsewhere, run from the repository root.
#
#   BIN=.gpu bash benches/gpu/check.sh [OUT]
#
# BIN holds `ono`, `xtask`, `spectral_paths` and `cholesky_ladder` (release builds of this
# checkout: `cargo build --release -p ono-cli -p xtask -p ono-benches --bins`); WHEELS (default
# .whl) may hold the PyTorch side's pinned packages as wheels (`xtask bench-compare` lists them),
# which are installed into a temporary folder. DATA (default $BIN/data) holds the quick profile's
# small inputs for section 5: the neuraloperator Darcy files (`neuraloperator-0.3.0/`, as
# `cargo xtask reproduce` fetches them) and `darcy_cloud.safetensors` (the quick profile's
# Elasticity stand-in, from any quick results folder's `data/`). SECTIONS (default "1 2 3 4 5 6")
# picks the sections, so that a rerun can repeat only what failed. It prints, and writes under OUT
# (default ./gpu-out):
#   1. bench-compare on CUDA: ours against the PyTorch references, ONO and GNOT at the Darcy, NS2d
#      and Elasticity presets, FNO and the Galerkin Transformer at Darcy (bench-compare.{txt,json});
#   2. one training step of every other architecture on CUDA with its host-read count
#      (bench-step.jsonl);
#   3. `ono reproduce --profile smoke` on CUDA: every table's experiments, a few steps each
#      (smoke/report.md), resumable, under a time limit;
#   4. the spectral multiply's two paths and the Cholesky ladders on CUDA (kernels.txt);
#   5. whole training loops on CUDA: the quick profile's Darcy cells of every family there and two
#      Elasticity cells, EPOCHS epochs of ours (`ono train --handoff`) and then of the PyTorch
#      reference loop (`benches/pytorch/train_ref.py`) on the same hand-off: data, split, initial
#      weights and recipe (train/summary.txt);
#   6. a rehearsal of the paper plan on CUDA (`ono reproduce --rehearse`, REHEARSE_ONLY tables,
#      default table1; `--jobs 2` on the one GPU): every cell at its paper model size for an epoch
#      of a few steps on miniature published-format files, with each cell's status, seconds and
#      error (rehearsal/summary.json; rehearsal.txt);
#   7. the paper plan's budget on CUDA (`ono reproduce --plan-only --measure`, MEASURE_ONLY tables,
#      default all): every trained experiment at its real size and batch for three batches on
#      files of the published shapes, with parameters, seconds per batch, peak GPU memory, the
#      data's size and the estimated hours of its run (budget/budget.md, budget.json). Not in the
#      default SECTIONS: the whole plan takes longer than the rest of the check;
#   8. data parallelism through NCCL at world size 1 (`torch.distributed.run --nproc-per-node 1
#      ono train`) against plain training, ONO and FNO-2D on a generated Darcy set, samples per
#      second (dp/summary.txt; benches/data_parallel.sh). The binary must be built with NCCL
#      (the xtask's venv has the CUDA headers; `ono info` need not say so: a build without them
#      fails section 8 with "this build of ono-dist has no NCCL backend").
#   9. the training step as a CUDA graph (`graphs`, issue #47): sections 1, 2 and 5 run ours at
#      its default, `graphs = "auto"` (each step shape captured at its second step, then
#      replayed); this section reruns them with graphs off into graphs-off/ and puts both beside
#      the PyTorch figures (graphs-summary.txt, benches/gpu/graphs_summary.py): every model's
#      step at bench-compare's shapes, the other architectures' steps, the quick cells' epochs.
#      With 7 in SECTIONS it also measures the paper plan's budget with graphs off
#      (graphs-off/budget/budget.md, beside section 7's). Run it after 1, 2 and 5 (SECTIONS="1 2
#      5 9"); the figures go to docs/benchmarks.md.
set -uo pipefail
BIN=${BIN:-.gpu}
WHEELS=${WHEELS:-.whl}
DATA=${DATA:-$BIN/data}
SECTIONS=${SECTIONS:-1 2 3 4 5 6}
DEVICE=${DEVICE:-cuda}
OUT=${1:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
REPO=$(pwd)
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
PY=${PYTHON:-python3}
TORCH_LIB=$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/ono-site "$WHEELS"/*.whl && export PYTHONPATH=/tmp/ono-site${PYTHONPATH:+:$PYTHONPATH}
fi
ONO=$(cd "$BIN" && pwd)/ono
if [ "$DEVICE" = cuda ]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
    "$PY" -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))' | tee -a "$OUT/machine.txt"
fi
nproc | sed 's/^/cpu cores: /' | tee -a "$OUT/machine.txt"

if want 1; then
echo "== 1. bench-compare on $DEVICE"
timeout "${COMPARE_S:-300}" "$BIN/xtask" bench-compare --ono "$ONO" --python "$(command -v "$PY")" \
    --device "$DEVICE" --models ono,gnot,fno,galerkin --steps "${STEPS:-10}" \
    --json "$OUT/bench-compare.json" 2>&1 | tee "$OUT/bench-compare.txt"
fi

# One training step of the architectures bench-compare leaves out, into DIR/bench-step.jsonl
# (one JSON line each), with ours' extra flags (section 9: --graphs off).
other_steps() {
    local dir=$1
    shift
    local extra=("$@")
    : >"$dir/bench-step.jsonl"
    : >"$dir/bench-step.err"
    for spec in "ufno darcy darcy" "ffno darcy darcy" "lsm darcy darcy" "transolver darcy darcy" \
        "transolver elasticity elasticity" "geofno elasticity elasticity" \
        "ono ns2d ns2d" "ono elasticity elasticity"; do
        set -- $spec
        timeout 60 "$ONO" bench-step --arch "$1" --preset "$2" --shapes "$3" --steps 5 --warmup 2 \
            --device "$DEVICE" "${extra[@]}" >>"$dir/bench-step.jsonl" 2>>"$dir/bench-step.err" \
            || echo "{\"arch\": \"$1\", \"preset\": \"$2\", \"failed\": true}" >>"$dir/bench-step.jsonl"
    done
}

if want 2; then
echo "== 2. one training step of the other architectures on $DEVICE"
other_steps "$OUT"
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
fi

if want 3; then
echo "== 3. the smoke profile on $DEVICE"
neuralop=()
[ -d "$DATA/neuraloperator-0.3.0" ] && neuralop=(--neuralop-dir "$DATA/neuraloperator-0.3.0")
timeout "${SMOKE_S:-200}" "$ONO" reproduce --profile smoke --device "$DEVICE" --out "$OUT/smoke" \
    "${neuralop[@]}" >"$OUT/smoke.log" 2>&1
echo "reproduce exit: $?"
tail -n 5 "$OUT/smoke.log"
if [ -f "$OUT/smoke/report.md" ]; then
    grep -c '| done' "$OUT/smoke/report.md" | sed 's/^/experiments done: /'
fi
fi

if want 4; then
echo "== 4. kernels on $DEVICE: the spectral multiply's paths, the Cholesky ladders"
{
    timeout 120 "$BIN/spectral_paths" --device "$DEVICE" --rounds "${ROUNDS:-5}" --calls 10
    timeout 120 "$BIN/cholesky_ladder" --device "$DEVICE" --rounds "${ROUNDS:-5}" --calls 50
} 2>&1 | tee "$OUT/kernels.txt"
fi

if want 5; then
EPOCHS=${EPOCHS:-3}
CELLS=${CELLS:-darcy/fno darcy/ufno darcy/ffno darcy/lsm darcy/transolver darcy/gnot darcy/ono elasticity/ono elasticity/transolver}
echo "== 5. training loops on $DEVICE, $EPOCHS epochs: ours, then the PyTorch reference loop"
plan="$OUT/train"
"$ONO" reproduce --profile quick --plan-only --out "$plan" --neuralop-dir "$DATA/neuraloperator-0.3.0" >/dev/null \
    || echo "plan-only failed"
mkdir -p "$plan/data"
cp "$DATA/darcy_cloud.safetensors" "$plan/data/" 2>/dev/null || echo "no darcy_cloud.safetensors in $DATA"
for cell in $CELLS; do
    d="$plan/$cell"
    [ -f "$d/experiment.toml" ] || { echo "$cell: not in the quick plan"; continue; }
    sed -i -e "s/^epochs = .*/epochs = $EPOCHS/" -e "s/^device = .*/device = \"$DEVICE\"/" "$d/experiment.toml"
    (cd "$d" && timeout "${CELL_S:-120}" "$ONO" train experiment.toml --quiet --handoff ref >ours.log 2>&1) \
        || { echo "$cell: ours failed"; tail -n 3 "$d/ours.log"; continue; }
    (cd "$d" && timeout "${CELL_S:-120}" "$PY" "$REPO/benches/pytorch/train_ref.py" ref --quiet >ref.log 2>&1) \
        || { echo "$cell: reference failed"; tail -n 3 "$d/ref.log"; }
done
"$PY" - "$plan" $CELLS <<'EOF' | tee "$OUT/train-summary.txt"
import json, os, statistics, sys
plan, cells = sys.argv[1], sys.argv[2:]
print("Epoch seconds: the first epoch (CUDA warm-up included) and the median of the others; error after the last epoch.")
print("| cell | ours first / rest s | reference first / rest s | rest ratio | ours rel L2 | reference rel L2 |")
print("|---|---:|---:|---:|---:|---:|")
for cell in cells:
    d = os.path.join(plan, cell)
    try:
        ours = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if '"epoch"' in l]
        ref = json.load(open(os.path.join(d, "ref", "result.json")))
    except (OSError, ValueError) as e:
        print(f"| {cell} | missing: {e} | | | | |")
        continue
    o = [e["seconds"] for e in ours]
    r = [e["seconds"] for e in ref["history"]]
    orest, rrest = statistics.median(o[1:] or o), statistics.median(r[1:] or r)
    print(f"| {cell} | {o[0]:.2f} / {orest:.3f} | {r[0]:.2f} / {rrest:.3f} | {orest / rrest:.2f} "
          f"| {ours[-1]['test_rel_l2']:.4f} | {ref['test_rel_l2']:.4f} |")
EOF
fi

if want 6; then
echo "== 6. a rehearsal of the paper plan (${REHEARSE_ONLY:-table1}) on $DEVICE"
timeout "${REHEARSE_S:-240}" "$ONO" reproduce --rehearse --only "${REHEARSE_ONLY:-table1}" \
    --device "$DEVICE" --jobs 2 --out "$OUT/rehearsal" >"$OUT/rehearsal.log" 2>&1
echo "reproduce exit: $?"
"$PY" - "$OUT/rehearsal" <<'EOF' | tee "$OUT/rehearsal.txt"
import json, os, sys
try:
    s = json.load(open(os.path.join(sys.argv[1], "summary.json")))
except (OSError, ValueError) as e:
    sys.exit(f"no summary: {e}")
print("| experiment | status | seconds | test rel L2 |")
print("|---|---|---:|---:|")
for e in s["experiments"]:
    err = e.get("test_rel_l2")
    print(f"| {e['id']} | {e['status']} | {e.get('wall_s', 0):.1f} | {'' if err is None else f'{err:.3g}'} |")
EOF
fi

if want 7; then
echo "== 7. the paper plan's budget (${MEASURE_ONLY:-all tables}) on $DEVICE"
timeout "${MEASURE_S:-420}" "$ONO" reproduce --profile paper --plan-only --measure \
    ${MEASURE_ONLY:+--only "$MEASURE_ONLY"} --device "$DEVICE" --out "$OUT/budget" \
    >"$OUT/budget.log" 2>&1
echo "reproduce exit: $?"
cat "$OUT/budget/budget.md" 2>/dev/null || tail -5 "$OUT/budget.log"
fi

if want 8; then
echo "== 8. data parallelism on $DEVICE: NCCL at world size 1 against plain training"
DEVICE="$DEVICE" PROCS=1 EPOCHS="${DP_EPOCHS:-4}" TORCHRUN="$PY -m torch.distributed.run" \
    BIN="$BIN" timeout "${DP_S:-240}" bash "$REPO/benches/data_parallel.sh" "$OUT/dp" \
    >"$OUT/dp.log" 2>&1
echo "data_parallel exit: $?"
cat "$OUT/dp/summary.txt" 2>/dev/null || tail -5 "$OUT/dp.log"
fi

if want 9; then
echo "== 9. the step as a CUDA graph on $DEVICE: graphs off (sections 1, 2, 5 ran graphs auto)"
G="$OUT/graphs-off"
mkdir -p "$G"
timeout "${COMPARE_S:-300}" "$BIN/xtask" bench-compare --ono "$ONO" --python "$(command -v "$PY")" \
    --device "$DEVICE" --models ono,gnot,fno,galerkin --steps "${STEPS:-10}" --graphs off \
    --json "$G/bench-compare.json" 2>&1 | tee "$G/bench-compare.txt"
other_steps "$G" --graphs off
if [ -d "$OUT/train" ]; then
    for cell in ${CELLS:-darcy/fno darcy/ufno darcy/ffno darcy/lsm darcy/transolver darcy/gnot darcy/ono elasticity/ono elasticity/transolver}; do
        d="$OUT/train/$cell"
        [ -f "$d/experiment.toml" ] || continue
        mkdir -p "$G/train/$cell"
        # Beside the cell's own file (its relative paths are the file's), writing into graphs-off/.
        { echo 'graphs = "off"'; sed -e "s|^output_dir = .*|output_dir = \"$G/train/$cell\"|" "$d/experiment.toml"; } \
            >"$d/experiment-graphs-off.toml"
        (cd "$d" && timeout "${CELL_S:-120}" "$ONO" train experiment-graphs-off.toml --quiet \
            >"$G/train/$cell/ours.log" 2>&1) || { echo "$cell: graphs off failed"; tail -n 3 "$G/train/$cell/ours.log"; }
    done
fi
if want 7; then
    timeout "${MEASURE_S:-420}" "$ONO" reproduce --profile paper --plan-only --measure --graphs off \
        ${MEASURE_ONLY:+--only "$MEASURE_ONLY"} --device "$DEVICE" --out "$G/budget" \
        >"$G/budget.log" 2>&1
    echo "reproduce (graphs off) exit: $?"
fi
"$PY" "$REPO/benches/gpu/graphs_summary.py" "$OUT" "$G" | tee "$OUT/graphs-summary.txt"
fi
