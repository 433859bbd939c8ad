#!/usr/bin/env bash
# Brings deploy/compose.yaml up under a throwaway project, waits until it is healthy, then
# through the proxy selects, observes and reads the summary and status, checks that both
# replicas answered (by the proxy's X-Upstream header), and tears everything (volumes too) down. Exits non-zero on any failure.
# Needs the images of deploy/build-images.sh.
set -euo pipefail
cd "$(dirname "$0")"

export COMPOSE_PROJECT_NAME="${COMPOSE_PROJECT_NAME:-learning-bot-smoke-$$}"
export LEARNING_BOT_API_TOKEN="smoke-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
export POSTGRES_PASSWORD="smoke-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
export LEARNING_BOT_BIND=127.0.0.1
export LEARNING_BOT_PORT="${LEARNING_BOT_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
BASE_URL="http://127.0.0.1:$LEARNING_BOT_PORT/__openclaw__/api/learning"

if docker compose version >/dev/null 2>&1; then
  compose() { docker compose -f compose.yaml "$@"; }
elif command -v docker-compose >/dev/null 2>&1; then
  compose() { docker-compose -f compose.yaml "$@"; }
else
  echo "smoke: neither 'docker compose' nor docker-compose is installed" >&2
  exit 1
fi

fail() {
  echo "smoke: FAILED: $*" >&2
  compose ps >&2 || true
  compose logs --no-color --tail=40 >&2 || true
  exit 1
}

cleanup() { compose down -v --remove-orphans >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup

start=$(date +%s)
compose up -d 2>&1 | sed 's/^/  /' || fail "compose up"

# up -d returns once the proxy is started, which waits for both replicas to be healthy; wait
# for the proxy's own health check too.
proxy_id="$(compose ps -q proxy)"
[ -n "$proxy_id" ] || fail "no proxy container"
for _ in $(seq 1 90); do
  state="$(docker inspect -f '{{.State.Health.Status}}' "$proxy_id" 2>/dev/null || true)"
  [ "$state" = healthy ] && break
  sleep 1
done
[ "$state" = healthy ] || fail "proxy is '$state', not healthy"
migrate_exit="$(docker inspect -f '{{.State.ExitCode}}' "$(compose ps -a -q migrate 2>/dev/null || compose ps -q migrate)")"
[ "$migrate_exit" = 0 ] || fail "migrate exited $migrate_exit"
echo "smoke: healthy in $(($(date +%s) - start))s"

HEADERS="$(mktemp)"
BODY="$(mktemp)"
trap 'rm -f "$HEADERS" "$BODY"; cleanup' EXIT

# request METHOD PATH [JSON]: prints the body; fails unless the answer is 200.
request() {
  local method="$1" path="$2" data="${3:-}" code
  local args=(-sS -o "$BODY" -D "$HEADERS" -w '%{http_code}' -X "$method" "$BASE_URL/$path")
  if [ -n "$data" ]; then
    args+=(-H "Authorization: Bearer $LEARNING_BOT_API_TOKEN" -H "Content-Type: application/json"
      --data "$data")
  fi
  code="$(curl "${args[@]}")" || fail "$method $path: curl failed"
  [ "$code" = 200 ] || fail "$method $path answered $code: $(cat "$BODY")"
  grep -i '^x-upstream:' "$HEADERS" | tr -d '\r' | awk '{print $2}' >> "$UPSTREAMS"
  cat "$BODY"
}
UPSTREAMS="$(mktemp)"
trap 'rm -f "$HEADERS" "$BODY" "$UPSTREAMS"; cleanup' EXIT

ARMS='[{"armId": "tool:fs:Read", "tokenCost": 120},
       {"armId": "tool:web:WebSearch", "tokenCost": 400},
       {"armId": "skill:coding:main", "tokenCost": 200}]'

selection="$(request POST select "{\"arms\": $ARMS}")"
echo "smoke: select -> $selection"
echo "$selection" | python3 -c 'import json, sys; d = json.load(sys.stdin); assert isinstance(d, dict) and d, d' ||
  fail "select answered no selection"

observed="$(request POST observe "{\"traceId\": \"smoke-1\", \"arms\": $ARMS,
  \"toolCalls\": [{\"name\": \"Read\"}], \"assistantTexts\": [\"done\"],
  \"usage\": {\"input\": 1500, \"output\": 300}, \"channel\": \"smoke\"}")"
echo "smoke: observe -> $observed"

# Enough reads that round-robin reaches both replicas; each must count the observed run,
# whichever replica recorded it (after at most LEARNING_BOT_CACHE_TTL).
sleep 1
for i in 1 2 3 4; do
  summary="$(request GET summary)"
  traces="$(echo "$summary" | python3 -c 'import json, sys; print(json.load(sys.stdin)["traceCount"])')" ||
    fail "summary without traceCount: $summary"
  [ "$traces" -ge 1 ] || fail "summary $i counts $traces traces, expected the observed run"
done
echo "smoke: summary -> $summary"
status="$(request POST command '{"text": "status"}')"
echo "smoke: status -> $(echo "$status" | head -c 300)"
request GET healthz >/dev/null

echo "smoke: answered by $(sort "$UPSTREAMS" | uniq -c | awk '{printf "%s %s request(s); ", $2, $1}')"
# Each replica's address must be among those that answered (the proxy's X-Upstream header).
for service in app-1 app-2; do
  address="$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' \
    "$(compose ps -q "$service")")"
  grep -qx "$address:8787" "$UPSTREAMS" || fail "$service ($address) answered no request"
  echo "smoke: $service is $address"
done
echo "smoke: passed in $(($(date +%s) - start))s"
