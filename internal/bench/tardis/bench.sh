#!/usr/bin/env bash
# Whole-process replay export, fanoutd against tardis-dev, interleaved:
# each round runs both once per capture (order alternating by round) with
# hyperfine, then prints medians of wall and CPU (user+sys) time and the
# ratios. docs/performance.md.
#
#   bench.sh FANOUTD CACHE_DIR ROUNDS CAPTURE...
#
# FANOUTD is a built fanoutd binary; CACHE_DIR receives tardis-dev's cache
# (each capture is laid out once, before any run is timed).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
fanoutd="$1" cache="$2" rounds="$3"
shift 3
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for c in "$@"; do node "$here/run.js" --cache "$cache" --prepare "$c" >/dev/null; done
for r in $(seq "$rounds"); do
  for c in "$@"; do
    a="$fanoutd replay --export /dev/null $c"
    b="node $here/run.js --cache $cache --export $c"
    if [ $((r % 2)) -eq 0 ]; then first="$b" second="$a"; else first="$a" second="$b"; fi
    hyperfine -N --runs 1 --style none --export-json "$out/$(basename "$c").$r.json" "$first" "$second" >/dev/null 2>&1
  done
done
node - "$out" <<'EOF'
const fs = require('fs')
const path = require('path')
const dir = process.argv[2]
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2 }
const by = {}
for (const f of fs.readdirSync(dir).sort()) {
  const capture = f.replace(/\.\d+\.json$/, '')
  const runs = {}
  for (const r of JSON.parse(fs.readFileSync(path.join(dir, f))).results) {
    runs[r.command.startsWith('node ') ? 'tardis' : 'fanoutd'] = { wall: r.times[0], cpu: r.user + r.system }
  }
  ;(by[capture] ||= []).push(runs)
}
const ms = (s) => (s * 1000).toFixed(0)
console.log('capture\trounds\tfanoutd wall ms\ttardis-dev wall ms\twall ratio (median; range)\tfanoutd cpu ms\ttardis-dev cpu ms\tcpu ratio (median; range)')
for (const [capture, rs] of Object.entries(by)) {
  const col = (who, k) => rs.map((r) => r[who][k])
  const ratios = (k) => rs.map((r) => r.tardis[k] / r.fanoutd[k])
  const rr = (k) => `${med(ratios(k)).toFixed(1)}x (${Math.min(...ratios(k)).toFixed(1)}-${Math.max(...ratios(k)).toFixed(1)})`
  console.log([capture, rs.length, ms(med(col('fanoutd', 'wall'))), ms(med(col('tardis', 'wall'))), rr('wall'),
    ms(med(col('fanoutd', 'cpu'))), ms(med(col('tardis', 'cpu'))), rr('cpu')].join('\t'))
}
EOF
