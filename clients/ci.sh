#!/usr/bin/env bash
# The client libraries' tests: Python (pytest, Debian's python3-websockets
# and python3-pytest for the system python3) and TypeScript (npm ci, node
# --test). Both run the scenario suite against a fanoutd built from this
# tree (or $FANOUTD_BIN). The Go client's tests run with `go test ./client/`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! /usr/bin/python3 -c 'import websockets, pytest' 2>/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-websockets python3-pytest
fi
if [ -z "${FANOUTD_BIN:-}" ]; then
  FANOUTD_BIN="$(mktemp -d)/fanoutd"
  go build -o "$FANOUTD_BIN" ./cmd/fanoutd
fi
export FANOUTD_BIN
(cd clients/python && /usr/bin/python3 -m pytest -q tests/)
(cd clients/js && npm ci --no-audit --no-fund && node --test test/)
