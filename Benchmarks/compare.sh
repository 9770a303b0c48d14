#!/usr/bin/env bash
# Runs the LoadableKit benchmarks and prints the ratio table (library ÷ baseline, same run).
#
#   Benchmarks/compare.sh                     # build (release), run everything, print the table
#   Benchmarks/compare.sh --filter 'HotPath.*' # extra options go to `swift package benchmark`
#   Benchmarks/compare.sh --csv FILE          # print the table for an earlier run's CSV, no run
#
# Every run's raw numbers are kept in Benchmarks/.benchmarkBaselines/last-run.csv (git-ignored).
# Figures are medians (p50) of each benchmark's samples, divided by the N in its "×N" name.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

csv=""
if [ "${1:-}" = "--csv" ]; then
  csv="$2"
  shift 2
else
  mkdir -p "$here/.benchmarkBaselines"
  csv="$here/.benchmarkBaselines/last-run.csv"
  # `influx` is package-benchmark's CSV export: raw values (ns, counts, bytes) per percentile.
  swift package --package-path "$here" benchmark \
    --format influx --path stdout --no-progress "$@" > "$csv.tmp"
  mv "$csv.tmp" "$csv"
fi

python3 - "$csv" <<'PY'
import csv, re, sys
from collections import defaultdict

# (test, metric) -> {percentile: value}
data = defaultdict(dict)
with open(sys.argv[1], newline="") as f:
    for row in csv.reader(f):
        if len(row) < 15 or row[0] in ("measurement", "") or row[0].startswith("#"):
            continue
        test, metric, pct, value = row[8], row[6], float(row[9]), float(row[10])
        data[(test, metric)][pct] = value

def ops(test):
    m = re.search(r"×(\d+)", test)
    return int(m.group(1)) if m else 1

def p50(test, metric="Time(wallclock)"):
    v = data.get((test, metric), {}).get(50.0)
    return None if v is None else v / ops(test)

def raw(test, metric, pct=50.0):
    return data.get((test, metric), {}).get(pct)

def fmt_time(ns):
    if ns is None: return "—"
    if ns >= 1e6: return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3: return f"{ns / 1e3:.2f} µs"
    return f"{ns:.2f} ns" if ns < 10 else f"{ns:.1f} ns"

def fmt_num(x, unit=""):
    if x is None: return "—"
    return (f"{x:.2f}" if x < 10 and x != int(x) else f"{x:,.0f}") + unit

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

def fmt_ratio(r):
    if r is None: return "—"
    return f"{r:.3f}×" if r < 0.1 else f"{r:.2f}×" if r < 10 else f"{r:,.0f}×"

rows = []
def row(what, library, baseline, r, target, ok):
    verdict = "pending" if ok == "pending" else "—" if ok is None else ("met" if ok else "**missed**")
    rows.append((what, library, baseline, r, target, verdict))

def section(title):
    rows.append((f"**{title}**", "", "", "", "", ""))

H = "HotPath "
N = 10000
mutex = p50(f"{H}Mutex.withLock floor ×{N}")
actor = p50(f"{H}ActorMemoizer.value nonisolated ×{N}")
harness_mallocs = raw(f"{H}Mutex.withLock floor ×{N}", "Malloc(total)") or 0

section("1. Hot path (per call, loaded loadable)")
for api in ("load()", "fetchIfNeeded()"):
    t = f"{H}{api} nonisolated ×{N}"
    lib = p50(t)
    r = ratio(lib, mutex)
    row(f"`{api}` nonisolated ÷ `Mutex.withLock`", fmt_time(lib), fmt_time(mutex), fmt_ratio(r), "≤ 3×",
        None if r is None else r <= 3)
    m = raw(t, "Malloc(total)")
    allocs = None if m is None else (m - harness_mallocs) / N
    row(f"`{api}` allocations per call", fmt_num(allocs), "0", "", "0",
        None if allocs is None else allocs <= 0)
    s = ratio(actor, lib)
    row(f"actor memoizer ÷ `{api}` (speed-up)", fmt_time(lib), fmt_time(actor), fmt_ratio(s), "≥ 4× faster",
        None if s is None else s >= 4)
for api in ("load()", "fetchIfNeeded()"):
    lib = p50(f"{H}{api} MainActor ×{N}")
    r = ratio(lib, mutex)
    row(f"`{api}` from `@MainActor` ÷ `Mutex.withLock`", fmt_time(lib), fmt_time(mutex), fmt_ratio(r), "≤ 10×",
        None if r is None else r <= 10)
hop = p50(f"{H}ActorMemoizer.value MainActor ×{N // 10}")
row("actor memoizer from `@MainActor` (two hops, for scale)", fmt_time(hop), fmt_time(mutex),
    fmt_ratio(ratio(hop, mutex)), "", None)

section("2. Coalescing (per waiter, from the load's end until every caller returned)")
C = "Coalescing "
per = {}
for n in (1000, 10000, 40000):
    lib = p50(f"{C}AsyncLoadable.load() ×{n}")
    floor = p50(f"{C}raw continuations floor ×{n}")
    per[n] = (lib, floor)
    loads = raw(f"{C}AsyncLoadable.load() ×{n}", "loads", 100.0)
    row(f"{n:,} callers: per waiter (floor: bare continuations)", fmt_time(lib), fmt_time(floor),
        fmt_ratio(ratio(lib, floor)), "≤ 3 µs", None if lib is None else lib <= 3000)
    row(f"{n:,} callers: underlying loads", fmt_num(loads), "", "", "1", None if loads is None else loads == 1)
def spread(values):
    values = [v for v in values if v is not None]
    return max(values) / min(values) if len(values) == len(per) else None
lib_spread = spread([v[0] for v in per.values()])
floor_spread = spread([v[1] for v in per.values()])
row("flat: largest ÷ smallest per-waiter cost over 1k–40k (floor's own spread)", fmt_ratio(lib_spread),
    fmt_ratio(floor_spread), "", "≤ 1.1×", None if lib_spread is None else lib_spread <= 1.1)
n = 10000
lib = per[n][0]
for name, label in (("ActorMemoizer.value", "actor memoizer"), ("shared Task.value", "shared `Task.value`")):
    b = p50(f"{C}{name} ×{n}")
    s = ratio(b, lib)
    row(f"{label} ÷ `AsyncLoadable`, 10,000 callers", fmt_time(lib), fmt_time(b), fmt_ratio(s), "≥ 5× cheaper",
        None if s is None else s >= 5)
for n in (1000, 40000):
    for name, label in (("ActorMemoizer.value", "actor memoizer"), ("shared Task.value", "shared `Task.value`")):
        b = p50(f"{C}{name} ×{n}")
        row(f"{label} ÷ `AsyncLoadable`, {n:,} callers", fmt_time(per[n][0]), fmt_time(b),
            fmt_ratio(ratio(b, per[n][0])), "", None)

section("3. Creation and memory (AsyncLoadable<Int> made with a closure capturing a key)")
t, b = "Idle AsyncLoadable<Int> ×1000", "Idle ActorMemoizer<Int> ×1000"
bytes_, bbytes = p50(t, "Malloc(bytestotal)"), p50(b, "Malloc(bytestotal)")
row("bytes per idle loadable (actor memoizer)", fmt_num(bytes_, " B"), fmt_num(bbytes, " B"),
    fmt_ratio(ratio(bytes_, bbytes)), "≤ 200 B", None if bytes_ is None else bytes_ <= 200)
allocs, ballocs = p50(t, "Malloc(total)"), p50(b, "Malloc(total)")
row("allocations per idle loadable (actor memoizer)", fmt_num(allocs), fmt_num(ballocs),
    fmt_ratio(ratio(allocs, ballocs)), "≤ 3", None if allocs is None else allocs <= 3)
t, b = "Create+release AsyncLoadable<Int> ×1000", "Create+release ActorMemoizer<Int> ×1000"
lib, base = p50(t), p50(b)
row("create + release (actor memoizer)", fmt_time(lib), fmt_time(base), fmt_ratio(ratio(lib, base)), "≤ 250 ns",
    None if lib is None else lib <= 250)
t, b = "Peak memory AsyncLoadable<Int> ×1000000", "Peak memory ActorMemoizer<Int> ×1000000"
rss, brss = p50(t, "MemoryΔ(residentpeak)"), p50(b, "MemoryΔ(residentpeak)")
row("1,000,000 idle: peak resident per instance, array included", fmt_num(rss, " B"), fmt_num(brss, " B"),
    fmt_ratio(ratio(rss, brss)), "", None)
mb = raw(t, "MemoryΔ(residentpeak)")
row("1,000,000 idle: peak resident total", fmt_num(None if mb is None else mb / 2**20, " MiB"),
    fmt_num(None if raw(b, "MemoryΔ(residentpeak)") is None else raw(b, "MemoryΔ(residentpeak)") / 2**20, " MiB"),
    "", "", None)

def linear(title, tests, unit, baselines=None):
    """Two sizes of one benchmark: per-unit cost and 10× size ≤ 11× time. With baselines (the
    same two sizes of a hand-written equivalent), the baseline's own growth is shown beside it."""
    (small, big) = tests
    a, b = p50(small), p50(big)
    if a is None and b is None:
        row(title, "pending", "", "", "10× size ≤ 11× time", "pending")
        return
    ba, bb = (p50(baselines[0]), p50(baselines[1])) if baselines else (None, None)
    row(f"{title}: per {unit} at {ops(small):,}", fmt_time(a), fmt_time(ba) if baselines else "",
        fmt_ratio(ratio(a, ba)) if baselines else "", "", None)
    row(f"{title}: per {unit} at {ops(big):,}", fmt_time(b), fmt_time(bb) if baselines else "",
        fmt_ratio(ratio(b, bb)) if baselines else "", "", None)
    total = ratio(None if b is None else b * ops(big), None if a is None else a * ops(small))
    base_total = ratio(None if bb is None else bb * ops(big), None if ba is None else ba * ops(small))
    row(f"{title}: time for ×{ops(big) // ops(small)} the size" + (" (baseline's own growth)" if baselines else ""),
        fmt_ratio(total), fmt_ratio(base_total) if baselines else "", "", "≤ 11×",
        None if total is None else total <= 11)

section("4. Pipelines")
linear("`map` chain, load (baseline: a chain of as many tasks)",
       ("Pipeline map chain load ×100", "Pipeline map chain load ×1000"), "node",
       ("Pipeline task chain baseline ×100", "Pipeline task chain baseline ×1000"))
linear("`zip`, load (baseline: a task group of as many closures)",
       ("Pipeline zip load ×1000", "Pipeline zip load ×10000"), "input",
       ("Pipeline task group baseline ×1000", "Pipeline task group baseline ×10000"))

section("5. ContentLoader")
claim = p50("ContentLoader claim begin+end ×1000")
claim_base = p50("ContentLoader baseline Mutex claim count ×1000")
row("claim begin+end on a loaded key ÷ a `Mutex`-protected claim count", "pending" if claim is None else fmt_time(claim),
    fmt_time(claim_base), fmt_ratio(ratio(claim, claim_base)), "", "pending" if claim is None else None)
linear("key churn", ("ContentLoader churn ×500", "ContentLoader churn ×5000"), "key")

section("6. Jobs")
for t, b, label in (
    ("Jobs reportProgress ×10000", "Jobs baseline Mutex progress ×10000",
     "one `reportProgress` ÷ a `Mutex`-protected progress value"),
    ("Jobs pausePoint ×10000", "Jobs baseline Task.checkCancellation ×10000",
     "one `pausePoint()` ÷ `Task.checkCancellation()`"),
):
    v, base = p50(t), p50(b)
    row(label, "pending" if v is None else fmt_time(v), fmt_time(base), fmt_ratio(ratio(v, base)), "",
        "pending" if v is None else None)
    m = raw(t, "Malloc(total)")
    if m is not None:
        row(f"{label.split(' ÷')[0]}: allocations per call", fmt_num(m / ops(t)), "", "", "", None)

section("7. A waiter cancelling (from `Task.cancel()` until that caller threw)")
for others in (100, 10000):
    v = p50(f"Cancel a waiter among {others} AsyncLoadable ×100")
    floor = p50(f"Cancel a waiter among {others} bare continuation floor ×100")
    row(f"among {others:,} other waiters, who all still get the content (floor: bare continuations)",
        fmt_time(v), fmt_time(floor), fmt_ratio(ratio(v, floor)), "≤ 2 µs", None if v is None else v <= 2000)

print("| benchmark | LoadableKit | baseline | ratio | target | |")
print("|---|---:|---:|---:|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
PY
