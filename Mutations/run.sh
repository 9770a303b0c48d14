#!/usr/bin/env bash
# The mutation check (see Mutations/README.md and CONTRIBUTING.md, "Before a release").
#
# For each mutant (Mutations/NN-name.patch, or those named on the command line), in one scratch
# copy of the repository whose .build is reused from one mutant to the next:
#   reset the sources, apply the patch, `swift build --build-tests` (a failure: `broken`), then
#   `swift test` in a session of its own (setsid) under a timeout (a timeout: `hung`, and every
#   process of that session is killed). A failing suite is `killed`, a passing one `survived`.
#
# Usage:
#   Mutations/run.sh [options] [mutant ...]     a mutant is named by its number (07), its full name
#                                               (07-status-stream-unbounded) or a part of the name
#   --list          list the mutants with their area and file, and exit
#   --check-apply   only check that each patch applies and the mutant builds (no tests)
#   --no-build      with --check-apply: only check that the patches apply (seconds)
#   --no-baseline   skip the run of the unmutated suite (which must pass) before the mutants
#   --keep          keep the scratch directory (and its logs) afterwards
#
# Environment:
#   MUTATION_TIMEOUT        seconds one `swift test` may take before the mutant counts as hung (300)
#   MUTATION_BUILD_TIMEOUT  seconds one build may take (1800)
#   MUTATION_SCRATCH        the scratch directory to use; reused (and kept) if it exists, which
#                           keeps its .build warm from one run to the next
#   MUTATION_TEST_ARGS      extra arguments for `swift test` (e.g. "--skip SoakTests")
#
# Exit status: 0 when every mutant was killed; 1 when one survived or hung; 2 when one is broken
# (or does not apply) or the unmutated suite fails.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
timeout_s=${MUTATION_TIMEOUT:-300}
build_timeout_s=${MUTATION_BUILD_TIMEOUT:-1800}
test_args=${MUTATION_TEST_ARGS:-}

list=0 check_apply=0 no_build=0 baseline=1 keep=0
names=()
while (($#)); do
  case "$1" in
    --list) list=1 ;;
    --check-apply) check_apply=1 ;;
    --no-build) no_build=1 ;;
    --no-baseline) baseline=0 ;;
    --keep) keep=1 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option: $1" >&2; exit 2 ;;
    *) names+=("$1") ;;
  esac
  shift
done

# The mutants to run, in order.
all=()
for patch in "$here"/[0-9]*.patch; do
  [ -e "$patch" ] && all+=("$(basename "$patch" .patch)")
done
selected=()
if ((${#names[@]} == 0)); then
  selected=("${all[@]}")
else
  for name in "${names[@]}"; do
    found=0
    for mutant in "${all[@]}"; do
      if [[ $mutant == "$name" || $mutant == "$name"-* || $mutant == *"$name"* ]]; then
        selected+=("$mutant")
        found=1
      fi
    done
    ((found)) || { echo "no mutant matches '$name' (see --list)" >&2; exit 2; }
  done
fi

header_field() {  # header_field <mutant> <Field>: the value of "# Field: …" in the patch header
  sed -n "s/^# $2: //p" "$here/$1.patch" | head -n 1
}

if ((list)); then
  for mutant in "${selected[@]}"; do
    area=$(sed -n '1s/^# Mutant [^ ]* (\(.*\))$/\1/p' "$here/$mutant.patch")
    printf '%-40s %-12s %s\n' "$mutant" "$area" "$(header_field "$mutant" File)"
  done
  exit 0
fi

# --- The scratch copy ------------------------------------------------------------------------
if [ -n "${MUTATION_SCRATCH:-}" ]; then
  scratch=$MUTATION_SCRATCH
  keep=1
  mkdir -p "$scratch"
else
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/loadablekit-mutations.XXXXXX")
fi
logs=$scratch/.mutation-logs
git_s() { git -C "$scratch" -c user.name=mutations -c user.email=mutations@localhost -c commit.gpgsign=false "$@"; }

test_pgid=""
cleanup() {
  if [ -n "$test_pgid" ]; then kill_session "$test_pgid"; fi
  if [ -d "$scratch/.git" ]; then git_s checkout -q -- . 2>/dev/null; git_s clean -fdq 2>/dev/null; fi
  if ((keep)); then
    echo "scratch directory kept: $scratch (logs in $logs)"
  else
    rm -rf "$scratch"
  fi
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

# Copies the working tree (not .git, not build directories) into the scratch directory, keeping
# its .build, and makes it a repository of its own, so that `git checkout` and `git apply` there
# never touch this repository. The files are extracted with the time of the copy (`-m`), not their
# own: a file last edited before the kept .build's last mutant was built is older than the object
# that mutant left, and the build took that object, mutated, for current.
sync_scratch() {
  find "$scratch" -mindepth 1 -maxdepth 1 ! -name .build ! -name .mutation-logs -exec rm -rf {} +
  tar -C "$root" --exclude=./.git --exclude='./.build*' --exclude='*/.build' --exclude=./.swiftpm \
    --exclude='*/.swiftpm' -cf - . | tar -C "$scratch" -m -xf -
  mkdir -p "$logs"
  git_s init -q &&
    echo "/.mutation-logs/" >>"$scratch/.git/info/exclude" &&
    git_s add -A &&
    git_s commit -qm "sources under test" --no-verify --allow-empty
}

reset_scratch() {
  git_s checkout -q -- .
  git_s clean -fdq
}

build() {  # build <log>
  (cd "$scratch" && timeout -s KILL "$build_timeout_s" swift build --build-tests) >"$1" 2>&1
}

# Kills every process of the session `$1` (which `run_suite` made with setsid). Not only its
# process group: SwiftPM starts the test binary in a process group of its own, in the same session.
kill_session() {
  local sid=$1 pids
  kill -KILL -- "-$sid" 2>/dev/null
  pids=$(ps -e -o pid=,sid= | awk -v sid="$sid" '$2 == sid { print $1 }')
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null
  fi
}

# Runs the suite in a session of its own; on timeout the whole session (swift test, the test
# runner and whatever they started) is killed. Sets `outcome` to passed / failed / hung. (Not run
# in a command substitution: the EXIT trap must know the session to kill on an interrupt.)
outcome=""
run_suite() {  # run_suite <log>
  local log=$1 pid sleeper finished="" status
  # Started from a shell without job control, the background job is not a group leader, so
  # setsid makes the new session in this very process: its PID is the new group's ID.
  # shellcheck disable=SC2086
  # Line-buffered (stdbuf, where there is one), so that the log of a run killed for hanging shows
  # how far it got.
  local unbuffered=()
  if command -v stdbuf >/dev/null; then unbuffered=(stdbuf -oL -eL); fi
  setsid bash -c 'cd "$1" && shift && exec "$@"' _ "$scratch" "${unbuffered[@]}" swift test $test_args \
    >"$log" 2>&1 </dev/null &
  pid=$!
  test_pgid=$pid
  sleep "$timeout_s" &  # the watchdog
  sleeper=$!
  wait -n -p finished "$pid" "$sleeper"
  status=$?
  if [ "$finished" = "$sleeper" ]; then
    kill_session "$pid"
    wait "$pid" 2>/dev/null
    test_pgid=""
    outcome=hung
    return
  fi
  kill "$sleeper" 2>/dev/null
  wait "$sleeper" 2>/dev/null
  # Whatever the suite started and left behind in its session goes with it.
  kill_session "$pid"
  test_pgid=""
  if ((status == 0)); then outcome=passed; else outcome=failed; fi
}

# The tests that started and never ended in a log (Swift Testing's format): what hung.
unfinished_tests() {  # unfinished_tests <log>
  awk '
    / Test case / || / Test run / { next }
    /Test .* started\.$/ { sub(/^.*Test /, ""); sub(/ started\.$/, ""); open[$0] = 1; order[++n] = $0; next }
    /Test .* (passed|failed) after / { sub(/^.*Test /, ""); sub(/ (passed|failed) after .*$/, ""); delete open[$0] }
    END { for (i = 1; i <= n; i++) if (order[i] in open) { print order[i]; delete open[order[i]] } }
  ' "$1" | head -n 4 | paste -sd, -
}

# The first few failing tests named in a log (Swift Testing's and XCTest's formats), or the crash.
failing_tests() {  # failing_tests <log>
  local names
  names=$(grep -aoE '(✘|􀢄) Test [^ (]+(\([^)]*\))?' "$1" | grep -avE ' Test run$' | sed -E 's/^[^ ]+ Test //' |
    awk '!seen[$0]++' | head -n 4 | paste -sd, -)
  if [ -z "$names" ]; then
    names=$(grep -aoE "Test Case '[^']+' failed" "$1" | sed -E "s/Test Case '(.*)' failed/\1/" | awk '!seen[$0]++' | head -n 4 | paste -sd, -)
  fi
  if [ -z "$names" ]; then
    names=$(grep -aoE '(Fatal error|Precondition failed|Assertion failed|signal [0-9]+|Exited with (signal|unexpected)[^)]*)[^.]{0,80}' "$1" | head -n 1)
  fi
  echo "${names:-see log}"
}

echo "LoadableKit mutation check: ${#selected[@]} mutants, scratch $scratch, test timeout ${timeout_s}s"
sync_scratch || { echo "cannot prepare the scratch directory" >&2; exit 2; }

# --- Check that the patches apply (and build) ------------------------------------------------
if ((check_apply)); then
  bad=0
  for mutant in "${selected[@]}"; do
    reset_scratch
    if ! git_s apply --whitespace=nowarn "$here/$mutant.patch" 2>"$logs/$mutant.apply.log"; then
      printf '%-40s does not apply: %s\n' "$mutant" "$(head -n 1 "$logs/$mutant.apply.log")"
      bad=1
      continue
    fi
    if ((no_build)); then
      printf '%-40s applies\n' "$mutant"
      continue
    fi
    start=$SECONDS
    if build "$logs/$mutant.build.log"; then
      printf '%-40s applies and builds (%ds)\n' "$mutant" $((SECONDS - start))
    else
      printf '%-40s applies but does not build: %s\n' "$mutant" \
        "$(grep -m1 -aE 'error:' "$logs/$mutant.build.log" || echo "see $logs/$mutant.build.log")"
      bad=1
    fi
  done
  reset_scratch
  exit $((bad ? 2 : 0))
fi

# --- The baseline: the unmutated suite must pass -----------------------------------------------
if ((baseline)); then
  start=$SECONDS
  reset_scratch
  if ! build "$logs/baseline.build.log"; then
    echo "the unmutated sources do not build: see $logs/baseline.build.log" >&2
    keep=1
    exit 2
  fi
  run_suite "$logs/baseline.test.log"
  if [ "$outcome" != passed ]; then
    echo "the unmutated suite $outcome ($(failing_tests "$logs/baseline.test.log")): fix that first; see $logs/baseline.test.log" >&2
    keep=1
    exit 2
  fi
  echo "baseline: the unmutated suite passes ($((SECONDS - start))s)"
fi

# --- The mutants ---------------------------------------------------------------------------
killed=0 survived=0 hung=0 broken=0
survivors=() hangs=() brokens=()
for mutant in "${selected[@]}"; do
  start=$SECONDS
  reset_scratch
  if ! git_s apply --whitespace=nowarn "$here/$mutant.patch" 2>"$logs/$mutant.apply.log"; then
    printf '%-40s broken    (does not apply: %s)\n' "$mutant" "$(head -n 1 "$logs/$mutant.apply.log")"
    broken=$((broken + 1)); brokens+=("$mutant")
    continue
  fi
  if ! build "$logs/$mutant.build.log"; then
    printf '%-40s broken    (does not build: %s)\n' "$mutant" "$(grep -m1 -aE 'error:' "$logs/$mutant.build.log")"
    broken=$((broken + 1)); brokens+=("$mutant")
    continue
  fi
  built=$((SECONDS - start))
  run_suite "$logs/$mutant.test.log"
  took="build ${built}s, test $((SECONDS - start - built))s"
  case "$outcome" in
    failed)
      printf '%-40s killed    by %s (%s)\n' "$mutant" "$(failing_tests "$logs/$mutant.test.log")" "$took"
      killed=$((killed + 1)) ;;
    passed)
      printf '%-40s survived  (%s)\n' "$mutant" "$took"
      survived=$((survived + 1)); survivors+=("$mutant") ;;
    hung)
      log=$logs/$mutant.test.log
      failed_first=$(grep -qaE '(✘|􀢄) Test ' "$log" && failing_tests "$log")
      printf '%-40s hung      (no end within %ss, its session killed; still running: %s%s)\n' "$mutant" "$timeout_s" \
        "$(unfinished_tests "$log")" "${failed_first:+; failed before: $failed_first}"
      hung=$((hung + 1)); hangs+=("$mutant") ;;
  esac
done
reset_scratch

total=${#selected[@]}
percent=$(awk -v k="$killed" -v t="$total" 'BEGIN { printf "%d", t ? (100 * k / t) : 0 }')
((survived)) && echo "survived: ${survivors[*]}"
((hung)) && echo "hung: ${hangs[*]}"
((broken)) && echo "broken: ${brokens[*]}"
echo "$killed killed, $survived survived, $hung hung, $broken broken of $total ($percent% killed)"
if ((survived || hung)); then exit 1; fi
if ((broken)); then exit 2; fi
exit 0
