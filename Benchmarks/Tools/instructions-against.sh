#!/usr/bin/env bash
# Instructions per operation, an earlier commit against the working tree: the exact counterpart of
# `compare.sh --against`, whose wall-clock rows move by more than 10% between runs on a shared
# machine.
#
#   Benchmarks/Tools/instructions-against.sh REV                 # the default scenarios
#   Benchmarks/Tools/instructions-against.sh REV 'zip 0 1000' 'churn 0 1000'
#
# Each scenario is `NAME BASE N`: `loadable-profile NAME` is run under callgrind at BASE and at N,
# in both trees, and the figure is (instructions at N - at BASE) / (N - BASE). A scenario whose code
# in Tools/Profile/main.swift differs between the two trees is not compared (it says so). REV is
# checked out in a git worktree under $TMPDIR and built there (release, a few minutes the first
# time); the worktree stays for the next run. Exits 1 when a scenario is more than
# ${WORSE_PERCENT:-10}% worse. Needs valgrind.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
rev="${1:?usage: instructions-against.sh REV ['NAME BASE N' ...]}"
shift
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=('load 0 200000' 'fetchIfNeeded 0 200000' 'coalesce 1 10001' 'mapchain 0 5000' 'zip 0 1000'
    'claim 0 20000' 'keys 0 2000' 'churn 0 1000' 'graph 0 20')
fi
worse="${WORSE_PERCENT:-10}"
old="${TMPDIR:-/tmp}/loadablekit-against-$(git -C "$here" rev-parse --short "$rev")"
[ -d "$old" ] || git -C "$here" worktree add --detach -q "$old" "$rev"
profile=Benchmarks/.build/release/loadable-profile
for tree in "$old" "$here"; do
  swift build -c release --package-path "$tree/Benchmarks" --product loadable-profile > /dev/null
done
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# The code of one scenario in a tree's profile tool, to compare the two trees' scenarios.
scenario_code() {
  awk -v s="case \"$2\":" '$0==s{p=1;next} p&&/^case "/{exit} p' "$1/Benchmarks/Tools/Profile/main.swift"
}

per_op() {  # TREE NAME BASE N
  local at
  for at in "$3" "$4"; do
    valgrind --tool=callgrind --callgrind-out-file="$out/$2-$at.cg" "$1/$profile" "$2" "$at" > /dev/null 2>&1
  done
  python3 "$here/Benchmarks/Tools/callgrind-per-op.py" "$out/$2-$3.cg" "$out/$2-$4.cg" $(($4 - $3)) 1 |
    awk 'NR==1 {gsub(",", "", $4); print $4}'
}

status=0
printf '| scenario | %s | now | now ÷ before | |\n|---|---:|---:|---:|---|\n' "$rev"
for scenario in "${scenarios[@]}"; do
  read -r name base n <<< "$scenario"
  if [ "$(scenario_code "$old" "$name")" != "$(scenario_code "$here" "$name")" ]; then
    printf '| `%s` | — | — | — | the scenario differs between the trees |\n' "$scenario"
    continue
  fi
  before="$(per_op "$old" "$name" "$base" "$n")"
  now="$(per_op "$here" "$name" "$base" "$n")"
  verdict="$(python3 -c "
b, n, w = float('$before'), float('$now'), float('$worse')
r = n / b if b else float('inf')
print(f'{r:.3f}× | ' + ('**worse by more than ' + str(int(w)) + '%**' if r > 1 + w / 100 else 'ok'))")"
  [[ "$verdict" == *worse* ]] && status=1
  printf '| `%s` | %s | %s | %s |\n' "$scenario" "$before" "$now" "$verdict"
done
exit $status
