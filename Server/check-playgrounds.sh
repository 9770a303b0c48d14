#!/usr/bin/env bash
# Runs every playground against example-server and checks it: builds the Server package, starts
# the server on a free loopback port (or $SERVER_PORT), waits at most 30 s for it to listen,
# runs each playground in-process and with --server, checks the two outputs are the same (load
# times, view counts and temporary paths aside), checks the server's log, and stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."

swift build --package-path Server --product example-server
swift build
bin=$(swift build --show-bin-path)
server=$(swift build --package-path Server --show-bin-path)/example-server
work=$(mktemp -d)
"$server" --port "${SERVER_PORT:-0}" > "$work/server.log" 2> "$work/server.err" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

url=""
for _ in $(seq 150); do
  url=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$work/server.log")
  [ -n "$url" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "example-server did not start:" >&2
    cat "$work/server.err" >&2  # says so plainly when the port is taken
    exit 1
  fi
  sleep 0.2
done
if [ -z "$url" ]; then
  echo "example-server did not listen within 30 s" >&2
  exit 1
fi
echo "example-server at $url"

# What differs between two runs anyway: load times (MapViewer's trace tree ends its lines with
# them), the portal's view counter (kept by the server across runs), temporary folders, the tile
# at which OfflineMapJob's pause lands (a tile whose request is on the wire when the pause comes
# is finished first) and the tiles its cancelled download had written, and MapViewer's trace
# tree itself: the shared portal's attempt is the child of whichever layer asked first, in-process
# too (the playground's own test checks that tree).
normalize() {
  sed '/^▸ 6\. The trace of opening the map/,$d' |
    sed -E 's/[0-9.]+ ms\]/N ms]/g; s/ in [0-9]+ ms$/ in N ms/; s/[0-9,]+ views/N views/g; s#/tmp/[A-Za-z0-9._-]+#TMP#g' |
    sed -E 's/tile [0-9]+ of/tile N of/g; s/"bytes":[0-9]+,"tilesDone":[0-9]+/CHECKPOINT/; s/[0-9]+ tiles on disk, [0-9]+ writes/N tiles on disk, N writes/' |
    sed -E 's/its checkpoint: [0-9]+ tiles; on disk: [0-9]+/its checkpoint: N tiles; on disk: N/'
}

# ServerJobs runs twice each way (the first run, then --resume in its folder), so its folders
# are named, and the lines of the resume's steps 1 and 2 are compared in any order: the jobs are
# restored in no set order, and their messages are printed by concurrent tasks, in-process too.
server_jobs() {  # server_jobs <local|http> [--server URL]
  local folder="$work/ServerJobs-$1"
  shift
  "$bin/ServerJobs" --output "$folder" "$@"
  "$bin/ServerJobs" --resume "$folder" "$@"
}
unordered_resume() {
  sed -E 's#/ServerJobs-(local|http)#/ServerJobs-RUN#g' > "$work/unordered"
  sed '/^▸ 1\. JobManager/,$d' "$work/unordered"
  sed -n '/^▸ 1\. JobManager/,/^▸ 3\./p' "$work/unordered" | sed '$d' | sort
  sed -n '/^▸ 3\./,$p' "$work/unordered"
}
echo "-- ServerJobs, both runs, --server $url"
server_jobs local > "$work/ServerJobs.local"
server_jobs http --server "$url" > "$work/ServerJobs.http" 2> "$work/ServerJobs.err"
if ! diff <(unordered_resume < "$work/ServerJobs.local" | normalize) <(unordered_resume < "$work/ServerJobs.http" | normalize); then
  echo "ServerJobs: the output over HTTP differs from the in-process one (above)" >&2
  exit 1
fi

for dir in Playgrounds/*/; do
  [ -f "$dir/main.swift" ] || continue
  name=$(basename "$dir")
  [ "$name" = ServerJobs ] && continue  # above
  echo "-- $name --server $url"
  "$bin/$name" > "$work/$name.local"
  "$bin/$name" --server "$url" > "$work/$name.http" 2> "$work/$name.err"
  if ! grep -q "services over HTTP" "$work/$name.err"; then
    echo "   (it has no services on the network: it ran in-process)"
    continue
  fi
  if ! diff <(normalize < "$work/$name.local") <(normalize < "$work/$name.http"); then
    echo "$name: the output over HTTP differs from the in-process one (above)" >&2
    exit 1
  fi
done

# The server saw the story: answers, the staged outages, and MapViewer's cancelled slow layer.
for expected in \
  "GET /portal/sharing/rest/portals/self → 200" \
  "GET /portal/sharing/rest/portals/self → 503" \
  "GET /gis/.*/tile/.* → 200" \
  "GET /geocode/GeocodeServer/findAddressCandidates.* → 200" \
  "POST /gp/GenerateOfflineMap/submitJob.* → 200" \
  "GET /gp/jobs/j1?messagesAfter=.* → 503" \
  "GET /gp/jobs/j1/result → 200"; do
  if ! grep -q -- "$expected" "$work/server.log"; then
    echo "the server's log has no line like: $expected" >&2
    tail -20 "$work/server.log" >&2
    exit 1
  fi
done
# ServerJobs submitted its job once and fetched its result once, over both runs.
for once in "POST /gp/GenerateOfflineMap/submitJob" "GET /gp/jobs/j1/result"; do
  if [ "$(grep -c -- "$once" "$work/server.log")" != 1 ]; then
    echo "the server's log has not exactly one $once" >&2
    exit 1
  fi
done
# MapViewer cancels its slow Fire Hydrants request: the count below includes it when the request
# reached the server before the cancel (otherwise nothing was sent at all).
echo "server log: $(grep -c '^#' "$work/server.log") requests, $(grep -c 'client went away' "$work/server.log") cancelled by the client"
