#!/usr/bin/env bash
# Our training loop against the PyTorch reference loop on one cell, in short alternating pairs:
# a time ratio that a VM's speed regimes (which flip within minutes) cannot decide on their own.
#
#   bash benches/pytorch/pairs.sh RESULTS CELL [EPOCHS [ROUNDS]]
#
# RESULTS is a results folder of `ono reproduce` (any profile; `--plan-only` is enough), CELL an
# experiment of it (`darcy/gnot`). Its experiment file runs with EPOCHS epochs (default 4) in a
# scratch folder (RESULTS/pairs/CELL), once to write the hand-off, then ROUNDS times (default 12)
# as a pair: ours (`ono train`) and the reference loop (`benches/pytorch/train_ref.py` on that
# hand-off), the order flipped every round so that neither side always runs second. Each run
# counts the mean epoch seconds after the first (warm-up); each round prints both and their
# ratio, and the end prints the median ratio, the rounds ours won, and the ratio of the minima.
# ONO (default: the `ono` on PATH) and PYTHON (default: python3; torch and the restatements'
# packages) pick the two sides; torch threads are the experiment file's in both.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,15p "$0"; exit 2; }
results=$1 cell=$2 epochs=${3:-4} rounds=${4:-12}
ONO=${ONO:-ono}
PY=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
src="$results/$cell/experiment.toml"
[ -f "$src" ] || { echo "pairs.sh: no $src" >&2; exit 2; }
[ "$epochs" -ge 2 ] || { echo "pairs.sh: EPOCHS must be at least 2 (the first is warm-up)" >&2; exit 2; }
d="$results/pairs/$cell"
rm -rf "$d" && mkdir -p "$d"
sed -e 's|^output_dir = .*|output_dir = "."|' -e "s/^epochs = .*/epochs = $epochs/" "$src" >"$d/experiment.toml"
(cd "$d" && "$ONO" train experiment.toml --quiet --handoff handoff >/dev/null)

# Mean seconds of the epochs after the first, from our metrics or the reference's result.
mean_after_first() {
    "$PY" - "$1" <<'EOF'
import json, sys
p = sys.argv[1]
if p.endswith(".jsonl"):
    s = [json.loads(l)["seconds"] for l in open(p) if '"epoch"' in l]
else:
    s = [e["seconds"] for e in json.load(open(p))["history"]]
print(sum(s[1:]) / len(s[1:]))
EOF
}
ours() {
    (cd "$d" && rm -rf checkpoints metrics.jsonl result.json && "$ONO" train experiment.toml --quiet >ours.log 2>&1)
    mean_after_first "$d/metrics.jsonl"
}
reference() {
    rm -f "$d/handoff/result.json"
    "$PY" "$here/train_ref.py" "$d/handoff" --quiet >"$d/reference.log" 2>&1
    mean_after_first "$d/handoff/result.json"
}
: >"$d/pairs.txt"
for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then o=$(ours); f=$(reference); else f=$(reference); o=$(ours); fi
    echo "$r $o $f" >>"$d/pairs.txt"
    "$PY" -c "print('$cell round $r: ours %.3f s, reference %.3f s per epoch, ratio %.3f' % ($o, $f, $o / $f))"
done
"$PY" - "$d/pairs.txt" "$cell" <<'EOF'
import statistics, sys
rows = [tuple(map(float, l.split()[1:])) for l in open(sys.argv[1])]
ratios = [o / f for o, f in rows]
print(f"{sys.argv[2]}: median ratio {statistics.median(ratios):.3f} over {len(rows)} rounds, "
      f"ours faster in {sum(r < 1 for r in ratios)}; minimum {min(o for o, _ in rows):.3f} "
      f"against {min(f for _, f in rows):.3f} s ({min(o for o, _ in rows) / min(f for _, f in rows):.3f})")
EOF
