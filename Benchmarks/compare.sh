#!/usr/bin/env bash
# Runs the LoadableKit benchmarks and prints the ratio table (library ÷ baseline, same run).
#
#   Benchmarks/compare.sh                       # build (release), run everything, print the table
#   Benchmarks/compare.sh --filter 'HotPath.*'  # other options go to `swift package benchmark`
#   Benchmarks/compare.sh --csv FILE            # print the table for an earlier run's CSV, no run
#   Benchmarks/compare.sh --check [--csv FILE]  # one line per target: PASS / MISS / NO DATA;
#                                               #   exits 1 when a target is missed
#   Benchmarks/compare.sh --against BEFORE.csv [--csv FILE]
#                                               # every ratio before and now; exits 1 when one is
#                                               #   more than 25% worse than before
#   Benchmarks/compare.sh --against BEFORE.csv --worse-than 10 [--csv FILE]
#                                               # the same, flagging a ratio more than 10% worse
#   Benchmarks/compare.sh --runs 3              # run everything three times (last-run-1.csv …)
#   Benchmarks/compare.sh --median --against A.csv --against B.csv --against C.csv --csv …
#                                               # each side's median of its runs, not its best
#
# `--csv` and `--against` may be repeated (two runs each, on a noisy machine): `--check` then
# checks every run, and `--against` compares the best figure of the runs before with the best
# of the runs now, or with `--median` the medians (three runs or more each: the rows that run on
# several threads vary by up to half between runs, and a best of two follows the luckiest).
#
# Targets: the SPEC's "Performance contract" (shared/SPEC.md), issue 13's where the SPEC is
# silent. `--check` is for people, not CI: timings don't belong in CI on a shared machine.
# Every run's raw numbers are kept in Benchmarks/.benchmarkBaselines/last-run.csv (git-ignored).
# Figures are medians (p50) of each benchmark's samples, divided by the N in its "×N" name
# (see Tools/ratios.py).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

csvs=()
run_status=0
mode="table"
befores=()
passthrough=()
runs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --csv) csvs+=("$2"); shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --median) export LOADABLE_AGGREGATE=median; shift ;;
    --check) mode="check"; shift ;;
    --worse-than) export LOADABLE_WORSE_PERCENT="$2"; shift 2 ;;
    --against) mode="against"; befores+=("$2"); shift 2 ;;
    *) passthrough+=("$1"); shift ;;
  esac
done

if [ ${#csvs[@]} -eq 0 ]; then
  mkdir -p "$here/.benchmarkBaselines"
  for run in $(seq 1 "$runs"); do
    if [ "$runs" -eq 1 ]; then csv="$here/.benchmarkBaselines/last-run.csv"
    else csv="$here/.benchmarkBaselines/last-run-$run.csv"; fi
    # `influx` is package-benchmark's CSV export: raw values (ns, counts, bytes) per percentile.
    # A benchmark that crashes or fails a precondition ends only its own process: the run goes
    # on, its rows print "—", and compare.sh exits with the run's status after printing.
    swift package --package-path "$here" benchmark \
      --format influx --path stdout --no-progress ${passthrough[@]+"${passthrough[@]}"} > "$csv.tmp" || run_status=$?
    mv "$csv.tmp" "$csv"
    csvs+=("$csv")
  done
elif [ ${#passthrough[@]} -gt 0 ]; then
  echo "compare.sh: with --csv nothing runs, so ${passthrough[*]} is ignored" >&2
fi

status=0
case "$mode" in
  table|check) python3 "$here/Tools/ratios.py" "$mode" "${csvs[@]}" || status=$? ;;
  against) python3 "$here/Tools/ratios.py" against "${befores[@]}" -- "${csvs[@]}" || status=$? ;;
esac
if [ "$run_status" -ne 0 ]; then
  echo "compare.sh: the benchmark run failed (status $run_status): a benchmark crashed or failed; see above" >&2
  exit "$run_status"
fi
exit "$status"
