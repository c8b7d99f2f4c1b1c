"""Section 9 of benches/gpu/check.sh: ours with graphs (sections 1, 2 and 5, `graphs = "auto"`)
and without (section 9's graphs-off/) beside the PyTorch figures, as markdown tables.

    python benches/gpu/graphs_summary.py OUT OUT/graphs-off
"""
import json
import os
import statistics
import sys


def compare_rows(path):
    """bench-compare's rows by (model, preset, round)."""
    try:
        return {(r["model"], r["preset"], r["round"]): r for r in json.load(open(path))["rows"]}
    except (OSError, ValueError, KeyError):
        return {}


def median_of(side):
    return side["record"]["median_s"] if side and side.get("record") else None


def step_lines(path):
    rows = {}
    try:
        for line in open(path):
            r = json.loads(line)
            if not r.get("failed"):
                rows[(r["arch"], r["preset"])] = r
    except (OSError, ValueError):
        pass
    return rows


def final_error(path):
    """The last epoch's test relative L2 of a metrics.jsonl."""
    try:
        rows = [json.loads(l) for l in open(path) if '"epoch"' in l]
        return rows[-1].get("test_rel_l2") if rows else None
    except (OSError, ValueError):
        return None


def rest_seconds(path):
    """The median epoch seconds after the first (CUDA warm-up and captures)."""
    try:
        s = [json.loads(l)["seconds"] for l in open(path) if '"epoch"' in l]
        return statistics.median(s[1:] or s)
    except (OSError, ValueError, statistics.StatisticsError):
        return None


def fmt(x, digits=4):
    return "" if x is None else f"{x:.{digits}f}"


def ratio(x, ref):
    return "" if x is None or not ref else f"{x / ref:.2f}"


def main(out, off):
    on_rows = compare_rows(os.path.join(out, "bench-compare.json"))
    off_rows = compare_rows(os.path.join(off, "bench-compare.json"))
    print("Training steps (median s) at bench-compare's shapes: ours with graphs (auto) and without,")
    print("PyTorch's (the median of its runs in both calls), and the ratios to PyTorch.")
    print("| model | shapes | round | ours graphs | ours plain | PyTorch | graphs / PyTorch | plain / PyTorch |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for key in sorted(set(on_rows) | set(off_rows)):
        a, b = on_rows.get(key), off_rows.get(key)
        g = median_of(a["ours"]) if a else None
        p = median_of(b["ours"]) if b else None
        refs = [median_of(r["pytorch"]) for r in (a, b) if r and median_of(r["pytorch"])]
        ref = statistics.median(refs) if refs else None
        print(f"| {key[0]} | {key[1]} | {key[2]} | {fmt(g)} | {fmt(p)} | {fmt(ref)} | {ratio(g, ref)} | {ratio(p, ref)} |")

    son = step_lines(os.path.join(out, "bench-step.jsonl"))
    soff = step_lines(os.path.join(off, "bench-step.jsonl"))
    print()
    print("The other architectures' steps (median s): graphs (auto) against plain.")
    print("| arch | preset | graphs | plain | graphs / plain | engine |")
    print("|---|---|---:|---:|---:|---|")
    for key in sorted(set(son) | set(soff)):
        a, b = son.get(key, {}), soff.get(key, {})
        g, p = a.get("median_s"), b.get("median_s")
        print(f"| {key[0]} | {key[1]} | {fmt(g)} | {fmt(p)} | {ratio(g, p)} | {a.get('graphs', 'plain')} |")

    print()
    print("The quick cells' epochs (median s of epochs 2..): graphs (auto), plain, the reference loop;")
    print("and the last epoch's test error with graphs and without (CUDA kernels are not all")
    print("deterministic: the two differ by the plain run's own run-to-run spread at most).")
    print("| cell | graphs | plain | reference | graphs / reference | plain / reference | rel L2 graphs | rel L2 plain |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    train = os.path.join(out, "train")
    for root, _, files in sorted(os.walk(train)):
        if "metrics.jsonl" not in files:
            continue
        cell = os.path.relpath(root, train)
        g = rest_seconds(os.path.join(root, "metrics.jsonl"))
        p = rest_seconds(os.path.join(off, "train", cell, "metrics.jsonl"))
        try:
            hist = json.load(open(os.path.join(root, "ref", "result.json")))["history"]
            r = statistics.median([e["seconds"] for e in hist][1:] or [e["seconds"] for e in hist])
        except (OSError, ValueError, KeyError, statistics.StatisticsError):
            r = None
        eg = final_error(os.path.join(root, "metrics.jsonl"))
        ep = final_error(os.path.join(off, "train", cell, "metrics.jsonl"))
        print(f"| {cell} | {fmt(g, 3)} | {fmt(p, 3)} | {fmt(r, 3)} | {ratio(g, r)} | {ratio(p, r)} "
              f"| {fmt(eg, 5)} | {fmt(ep, 5)} |")
    print()
    print("Each cell's graphs, from its summary line (`graphs`: engine, shapes, steps recorded,")
    print("captured, replayed, plain; `fell_back`: why a capture failed under auto):")
    for root, _, files in sorted(os.walk(train)):
        if "ours.log" not in files:
            continue
        graphs = "no summary line"
        try:
            for line in open(os.path.join(root, "ours.log")):
                if line.startswith("{") and '"steps"' in line:
                    graphs = json.loads(line).get("graphs", "plain steps")
        except (OSError, ValueError):
            pass
        print(f"- {os.path.relpath(root, train)}: {graphs}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
