#!/bin/sh
# Runs the built image for real and checks what an operator relies on: a
# sim-engine container and a gateway container (the image's default command,
# `serve`, plus --upstream) sharing one network namespace; the gateway
# answers /health and a chat completion through the engine, its HEALTHCHECK
# passes, it runs as uid 10001, and `stop` (SIGTERM) ends it with exit 0.
#
# Usage: deploy/image/smoke.sh [IMAGE]   (default localhost/llmgw:<package.json version>)
# Environment: CONTAINER_ENGINE (podman, else docker).
set -eu

root=$(CDPATH='' cd -- "$(dirname -- "$0")/../.." && pwd -P)
version=$(sed -n 's/^  "version": "\([^"]*\)".*/\1/p' "$root/package.json")
image=${1:-localhost/llmgw:$version}
engine=${CONTAINER_ENGINE:-$(command -v podman >/dev/null 2>&1 && echo podman || echo docker)}
name=llmgw-smoke-$$
sim=$name-sim
gw=$name-gw

# One at a time: podman stops at a name already gone (the gateway, once stopped) and would leave the engine running.
cleanup() {
  "$engine" rm -f "$gw" >/dev/null 2>&1 || true
  "$engine" rm -f "$sim" >/dev/null 2>&1 || true
}
trap cleanup EXIT
fail() {
  echo "smoke: FAILED: $*" >&2
  "$engine" logs "$gw" 2>&1 | tail -20 >&2 || true
  exit 1
}

# The engine owns the namespace and its published ports (loopback, any free port).
"$engine" run -d --name "$sim" -p 127.0.0.1::8080 -p 127.0.0.1::9190 "$image" \
  sim-engine --model smoke-model --host 127.0.0.1 --port 8000 >/dev/null
"$engine" run -d --name "$gw" --network "container:$sim" "$image" serve --upstream http://127.0.0.1:8000 >/dev/null
api=$("$engine" port "$sim" 8080 | head -n 1)
echo "smoke: $image, gateway API at http://$api"

# Bounded wait for the gateway to listen and find the engine's model.
i=0
until curl -fsS "http://$api/v1/models" 2>/dev/null | grep -q smoke-model; do
  i=$((i + 1))
  [ "$i" -le 120 ] || fail "the gateway did not list smoke-model within 60 s"
  sleep 0.5
done
curl -fsS -o /dev/null "http://$api/health" || fail "GET /health"
echo "smoke: GET /health 200"

"$engine" healthcheck run "$gw" >/dev/null 2>&1 || [ "$engine" = docker ] || fail "the image's HEALTHCHECK"
[ "$engine" = docker ] || echo "smoke: HEALTHCHECK passes"

reply=$(curl -fsS "http://$api/v1/chat/completions" -H 'content-type: application/json' \
  -d '{"model":"smoke-model","messages":[{"role":"user","content":"hello"}],"max_tokens":8}') || fail "POST /v1/chat/completions"
echo "$reply" | grep -q '"chat.completion"' || fail "unexpected chat reply: $reply"
echo "smoke: chat completion: $(echo "$reply" | head -c 200)"

uid=$("$engine" exec "$gw" id -u)
[ "$uid" = 10001 ] || fail "runs as uid $uid, expected 10001"
echo "smoke: runs as uid $uid"

"$engine" stop -t 20 "$gw" >/dev/null
code=$("$engine" inspect -f '{{.State.ExitCode}}' "$gw")
[ "$code" = 0 ] || fail "exit code $code after SIGTERM, expected 0"
echo "smoke: stopped by SIGTERM, exit 0"
echo "smoke: OK"
