#!/usr/bin/env bash
# Runs every playground against example-server and checks it: builds the Server package, starts
# the server on a free loopback port (or $SERVER_PORT), waits at most 30 s for it to listen,
# runs each playground in-process and with --server, checks the two outputs are the same (load
# times, view counts and temporary paths aside: see normalize), checks the server's log, checks that each playground says so and exits when
# nothing listens at its --server, and stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."

swift build --package-path Server --product example-server
swift build
bin=$(swift build --show-bin-path)
server=$(swift build --package-path Server --show-bin-path)/example-server
work=$(mktemp -d)
: > "$work/server.log"  # before the server starts: the wait below reads it at once
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

# What differs between two runs anyway, in-process too, and only that:
normalize() {
  # - load times (the dependency tree's `[loaded 2.1 ms]`, the attempt trace's `in 3 ms`): the clock;
  sed -E 's/[0-9.]+ ms\]/N ms]/g; s/ in [0-9]+ ms$/ in N ms/' |
    # - the portal's view counter: the server keeps it across runs, and every run against the
    #   server counts (in-process, each run starts from the same count);
    sed -E 's/[0-9,]+ views/N views/g' |
    # - temporary folders: a new one each run;
    sed -E 's#/tmp/[A-Za-z0-9._-]+#TMP#g'
  # Where OfflineMapJob and ServerJobs pause and cancel is not normalized: their tile service
  # stalls at a set request until the pause or the cancel has come (holdRequests(after:)).
}

# ServerJobs runs twice each way (the first run, then --resume in its folder), so its folders
# are named, and their names are the one difference normalized here.
server_jobs() {  # server_jobs <local|http> [--server URL]
  local folder="$work/ServerJobs-$1"
  shift
  "$bin/ServerJobs" --output "$folder" "$@"
  "$bin/ServerJobs" --resume "$folder" "$@"
}
echo "-- ServerJobs, both runs, --server $url"
server_jobs local > "$work/ServerJobs.local"
server_jobs http --server "$url" > "$work/ServerJobs.http" 2> "$work/ServerJobs.err"
if ! diff <(sed 's#/ServerJobs-local#/ServerJobs-RUN#g' "$work/ServerJobs.local" | normalize) \
  <(sed 's#/ServerJobs-http#/ServerJobs-RUN#g' "$work/ServerJobs.http" | normalize); then
  echo "ServerJobs: the output over HTTP differs from the in-process one (above)" >&2
  exit 1
fi

for dir in Playgrounds/*/; do
  [ -f "$dir/main.swift" ] || continue
  name=$(basename "$dir")
  [ "$name" = ServerJobs ] && continue  # above
  echo "-- $name --server $url"
  "$bin/$name" > "$work/$name.local"
  wc -l < "$work/server.log" > "$work/$name.log-start"  # the server's log from here is this run's and the later ones'
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

# Thumbnails: the server's log has every thumbnail request the playground's summary counts
# ("service requests", the thumbnail service's own log, which the playground reads from the
# server), with the same outcomes; every load cancelled was a request the server held, and saw
# the client leave before it answered; and the held requests it released were answered. Only
# the log from its run on counts: PagedSearch, before it, asks for thumbnails too.
thumbnails() {
  tail -n "+$(($(cat "$work/Thumbnails.log-start") + 1))" "$work/server.log" | grep 'info/thumbnail/thumbnail.png' |
    grep -c -- "$1" || true
}
summary() { sed -n '/^▸ Summary/,$p' "$work/Thumbnails.http" | sed -n "s/^    $1  *[0-9]*  *\([0-9]*\)\$/\1/p"; }
for check in \
  "loads started|GET " "completed|→ 200" "failed|→ 503" "cancelled|client went away" "cancelled|(held) → client went away"; do
  row=${check%%|*} pattern=${check#*|}
  if [ -z "$(summary "$row")" ] || [ "$(summary "$row")" != "$(thumbnails "$pattern")" ]; then
    echo "Thumbnails: its summary says $row $(summary "$row"); the server's log has $(thumbnails "$pattern") thumbnail requests with \"$pattern\"" >&2
    exit 1
  fi
done
if [ "$(thumbnails "(held) → 200")" = 0 ]; then
  echo "Thumbnails: the server's log has no held thumbnail request that was released and answered" >&2
  exit 1
fi
echo "thumbnails: $(thumbnails "GET ") requests, $(thumbnails "(held) → 200") held then answered, $(thumbnails "client went away") cancelled by the client while held"

# The server saw the story: answers, the staged outages, and MapViewer's cancelled slow layer.
for expected in \
  "GET /portal/sharing/rest/portals/self → 200" \
  "GET /portal/sharing/rest/portals/self → 503" \
  "GET /gis/.*/tile/.* → 200" \
  "GET /geocode/GeocodeServer/findAddressCandidates.* → 200" \
  "POST /gp/GenerateOfflineMap/submitJob.* → 200" \
  "GET /gp/jobs/j1?messagesAfter=.* → 503" \
  "GET /gp/jobs/j1/result → 200" \
  "GET /portal/sharing/rest/search?q=parks&start=1&num=5 → 200" \
  "GET /portal/sharing/rest/search?q=parks&start=11&num=5 → 503" \
  "GET /portal/sharing/rest/search?q=parks&start=6&num=5 (held) → 200"; do
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
# ServerJobs' second run: its background status check (checkServerJobs()) asked the server once
# about its one server job, and the resume then fetched the result without asking again. The
# server's log has every status request the client logged, and the second run's are its last two
# requests about j1: the check's status request, then the result.
client_status=$(grep -c '^status j1 ' "$work/ServerJobs-http/job-service/requests.log" || true)
server_status=$(grep -c -- 'GET /gp/jobs/j1?messagesAfter=' "$work/server.log" || true)
if [ "$client_status" != "$server_status" ]; then
  echo "ServerJobs: the client logged $client_status status requests for j1; the server's log has $server_status" >&2
  exit 1
fi
last_two=$(grep -- 'GET /gp/jobs/j1' "$work/server.log" | tail -2 | sed -E 's/^#[0-9]+ //; s/messagesAfter=[0-9]+/messagesAfter=N/; s/ → ([0-9]+).*/ → \1/')
if [ "$last_two" != $'GET /gp/jobs/j1?messagesAfter=N → 200\nGET /gp/jobs/j1/result → 200' ]; then
  echo "ServerJobs: the server's last requests about j1 are not one status request (the check), then the result:" >&2
  echo "$last_two" >&2
  exit 1
fi
echo "ServerJobs: $server_status status requests for j1 over both runs; the second run's status check asked once, then the result was fetched"
# MapViewer cancels its slow Fire Hydrants request: the count below includes it when the request
# reached the server before the cancel (otherwise nothing was sent at all).
echo "server log: $(grep -c '^#' "$work/server.log") requests, $(grep -c 'client went away' "$work/server.log") cancelled by the client"

# A server that is not there: each playground with services says so in one line and exits
# non-zero, rather than trapping at its first request. The port was free a moment ago, and
# nothing listens on it.
if ! free=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'); then
  echo "no python3 to find a free port: the unreachable-server check is skipped" >&2
  exit 0
fi
for dir in Playgrounds/*/; do
  [ -f "$dir/main.swift" ] || continue
  name=$(basename "$dir")
  grep -q -- "services over HTTP" "$work/$name.err" 2>/dev/null || [ "$name" = ServerJobs ] || continue
  status=0
  "$bin/$name" --server "http://127.0.0.1:$free" > "$work/$name.unreachable" 2> "$work/$name.unreachable.err" || status=$?
  if [ "$status" = 0 ] || [ "$(cat "$work/$name.unreachable.err")" != "cannot reach the server at http://127.0.0.1:$free: cannot connect: nobody answers at the server's address" ] || [ -s "$work/$name.unreachable" ]; then
    echo "$name --server http://127.0.0.1:$free (nothing listens there) exited with $status and printed:" >&2
    cat "$work/$name.unreachable" "$work/$name.unreachable.err" >&2
    exit 1
  fi
done
echo "nothing listening at http://127.0.0.1:$free: every playground with services said so and exited non-zero"
