#!/usr/bin/env bash
# `make demo`: builds the demo command (test/demo/cmd/enipam-demo) into
# _out/demo/bin and runs it with the given arguments; DEMO_ONCE=1 makes it
# exit after printing. The demo builds the binaries it runs itself.
#
# The first build compiles the Kubernetes and Cilium client libraries and
# takes a few minutes, so it says so and prints a line every 15 s; later
# builds are cached and quiet.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$root/_out/demo/bin
cd "$root"

name="building the demo command into _out/demo/bin"
start=$SECONDS
if [ ! -x "$bin/enipam-demo" ]; then
  echo "==> $name (the first build compiles the Kubernetes and Cilium client libraries: a few minutes)"
fi
# The ticker takes its sleep with it when stopped, so nothing outlives the
# build.
( trap 'kill $! 2>/dev/null; exit 0' TERM
  while :; do sleep 15 & wait $!; echo "    ... $name: $((SECONDS - start))s"; done ) &
ticker=$!
trap 'kill "$ticker" 2>/dev/null || true' EXIT INT TERM
go build -o "$bin/enipam-demo" ./test/demo/cmd/enipam-demo
kill "$ticker" 2>/dev/null || true
wait "$ticker" 2>/dev/null || true
trap - EXIT INT TERM
exec "$bin/enipam-demo" "$@"
