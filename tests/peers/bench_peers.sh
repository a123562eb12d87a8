#!/usr/bin/env bash
# bench_peers.sh BENCH [N]: obx.h beside its Node.js peers (graphile-worker,
# pg-boss, pg-transactional-outbox) on one throwaway PostgreSQL cluster
# (tests/db.sh, fsync on, as make bench runs it) and on make bench's
# PostgreSQL workloads: enqueue 1 per transaction (N/4 messages), batch of
# 100 (N), drain with 1 and with 2 worker processes (N ready), and the
# commit-to-handler latency p50. `make bench-peers` runs it; not in CI (CI's
# machine cannot reach the npm registry).
#
# The library's rows are tests/bench.c's own (BENCH_ONLY=enq1,enqb,drain1,
# drain2,latency, one repeat per round), the peers' come from
# tests/peers/bench.mjs, which says which API and which settings each peer
# row uses and why. Every round runs the library and the three peers, the
# order rotating per round (interleaved repeats); the table shows medians
# and the ratios library / peer from this one run (latency: peer p50 /
# library p50, so above 1 is the library ahead there too).
#
# The peers are installed under build/peers with `npm ci` from
# tests/peers/package.json and its lockfile (exact versions); the install
# is kept until the lockfile changes.
#
# Environment:
#   OBX_PG_PORT, OBX_TEST_RUNDIR  port and run dir of the cluster (tests/db.sh)
#   BENCH_REPEATS     rounds (median printed), default 3
#   PEERS             which peers, default "graphile pgboss outbox"
#   PEERS_LATENCY_N   latency samples per peer and round, default 200
#   PEERS_TIMEOUT     seconds one peer's drain may take, default 900
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tests=$(dirname "$here")
bench=$1 n=${2:-20000}
n=$(( (n + 99) / 100 * 100 ))
build=$(cd "$(dirname "$bench")" && pwd)
dir=$build/peers
rundir=${OBX_TEST_RUNDIR:-${TMPDIR:-/tmp}/obx-test-$(id -u)}
export OBX_TEST_RUNDIR=$rundir
repeats=${BENCH_REPEATS:-3}
peers=${PEERS:-graphile pgboss outbox}

# ---- node, npm and the pinned peers --------------------------------------------------------------
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    cat >&2 <<'EOF'
bench-peers: node and npm are needed (Node.js 20 or later: pg-boss 10 requires it).
  Install them (Debian: apt-get install nodejs npm, or a Node.js 20+ release), then run
  make bench-peers again. make bench measures the library without them.
EOF
    exit 2
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if (( major < 20 )); then
    echo "bench-peers: Node.js $(node --version) is too old; pg-boss 10 needs 20 or later." >&2
    exit 2
fi
mkdir -p "$dir"
cp "$here/bench.mjs" "$dir/"
if ! cmp -s "$here/package-lock.json" "$dir/.installed-lock" || [[ ! -d $dir/node_modules ]]; then
    cp "$here/package.json" "$here/package-lock.json" "$dir/"
    echo "bench-peers: npm ci in $dir (the versions pinned in tests/peers/package-lock.json)"
    if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error); then
        cat >&2 <<'EOF'
bench-peers: npm ci failed. The peers come from the npm registry: run this where it
  is reachable, or point npm at a mirror that carries these exact versions
  (npm_config_registry=<url> make bench-peers); an offline machine can copy a
  build/peers/node_modules installed elsewhere from the same lockfile.
  make bench measures the library without the peers.
EOF
        exit 2
    fi
    cp "$here/package-lock.json" "$dir/.installed-lock"
fi

# ---- the cluster ------------------------------------------------------------------------------------
trap '"$tests/db.sh" stop pg >/dev/null 2>&1 || true' EXIT
"$tests/db.sh" start pg >/dev/null
eval "$("$tests/db.sh" env pg)"
# host:port:database:user out of the ODBC connection string, for node-postgres
export PEERS_PG=$(sed -E 's/.*Server=([^;]*);Port=([^;]*);Database=([^;]*);Uid=([^;]*);.*/\1:\2:\3:\4/' <<<"$OBX_TEST_PG")
raw=$rundir/peers-raw.txt
: >"$raw"

# One round of the library: its rows as bench.c prints them, into the raw file.
lib_round() {
    local out
    out=$(BENCH_REPEATS=1 BENCH_ONLY=enq1,enqb,drain1,drain2,latency BENCH_SWEEP= \
        "$bench" postgresql "${OBX_TEST_PG}Protocol=7.4-1;" "$n" 2>/dev/null)
    awk -v OFS=' ' '
        function row(key, line,   f) { split(substr(line, 48), f, " "); print "obx", key, f[1]; print "libpq", key, f[3] }
        /^outbox enqueue, 1 per transaction /        { row("enq1", $0) }
        /^outbox enqueue, 100 per transaction/       { row("enqb", $0) }
        /^outbox drain \(claim 100, ack\), 1 worker/ { row("drain1", $0) }
        /^outbox drain, 2 worker processes/          { row("drain2", $0) }
        function p50(line) { match(line, /p50 [0-9.]+/); return substr(line, RSTART + 4, RLENGTH - 4) }
        /^commit-to-handler latency, wake-up/        { print "obx", "latency", p50($0) }
        /^commit-to-handler latency, wake socket/    { print "obx", "latency_sock", p50($0) }
    ' <<<"$out" >>"$raw"
}

peer_round() {
    local p=$1 w
    for w in enq1 enqb drain1 drain2 latency; do
        # A failed measurement leaves its cell empty ("-") and says why; the rest goes on.
        (cd "$dir" && node bench.mjs "$p" "$w" "$n") | awk '$1 == "RESULT" { print $2, $3, $4 }' >>"$raw" ||
            echo "bench-peers: $p $w failed (its row shows -)" >&2
    done
}

sides=(lib $peers)
for ((r = 0; r < repeats; r++)); do
    for ((k = 0; k < ${#sides[@]}; k++)); do
        s=${sides[$(( (k + r) % ${#sides[@]} ))]} # rotate: no side always goes first
        if [[ $s == lib ]]; then lib_round; else peer_round "$s"; fi
    done
    echo "bench-peers: round $((r + 1)) of $repeats done" >&2
done

# ---- the table: medians, ratios -----------------------------------------------------------------------
echo
version=$(cd "$dir" && node -e '
    const [host, port, database, user] = process.env.PEERS_PG.split(":");
    const c = new (require("pg").Client)({ host, port: +port, database, user });
    c.connect().then(() => c.query("SHOW server_version")).then((r) => { console.log(r.rows[0].server_version.split(" ")[0]); return c.end(); })' 2>/dev/null || echo '?')
echo "== PostgreSQL $version, fsync on:" \
     "N = $n, medians of $repeats interleaved rounds; msgs/s (latency: p50 ms)"
echo "   peers: $(cd "$dir" && node -p '
    const d = require("./package-lock.json").packages;
    ["graphile-worker", "pg-boss", "pg-transactional-outbox"].map((p) => p + " " + d["node_modules/" + p].version).join(", ")')"
awk -v peers="$peers" '
    { v[$1, $2] = v[$1, $2] " " $3 }
    function med(s,   a, k, i, j, t) {
        k = split(s, a, " ")
        if (k == 0) return ""
        for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    END {
        name["graphile"] = "graphile-worker"; name["pgboss"] = "pg-boss"; name["outbox"] = "pg-tx-outbox"
        wl["enq1"] = "enqueue, 1 per transaction"; wl["enqb"] = "enqueue, 100 per transaction"
        wl["drain1"] = "drain, 1 worker"; wl["drain2"] = "drain, 2 workers"; wl["latency"] = "commit-to-handler p50 (ms)"
        np = split(peers, p, " ")
        printf "%-30s %9s %9s", "workload", "obx.h", "libpq"
        for (i = 1; i <= np; i++) printf " %15s", name[p[i]]
        printf " |"
        for (i = 1; i <= np; i++) printf " %14s", "obx/" name[p[i]]
        printf "\n"
        split("enq1 enqb drain1 drain2 latency", ws, " ")
        for (k = 1; k <= 5; k++) {
            w = ws[k]; lib = med(v["obx", w]); ideal = med(v["libpq", w])
            fmt = w == "latency" ? "%.2f" : "%.0f"
            printf "%-30s %9s %9s", wl[w], lib == "" ? "-" : sprintf(fmt, lib), ideal == "" ? "-" : sprintf(fmt, ideal)
            for (i = 1; i <= np; i++) { x = med(v[p[i], w]); printf " %15s", x == "" ? "-" : sprintf(fmt, x) }
            printf " |"
            for (i = 1; i <= np; i++) {
                x = med(v[p[i], w])
                if (x == "" || lib == "" || lib + 0 == 0 || x + 0 == 0) { printf " %14s", "-"; continue }
                printf " %14.2f", w == "latency" ? x / lib : lib / x
            }
            printf "\n"
        }
        sock = med(v["obx", "latency_sock"])
        if (sock != "") printf "(obx.h latency: in-process wake-up above; through the wake socket, producer in another process: p50 %.2f ms)\n", sock
    }
' "$raw"
echo "(raw figures of every round: $raw)"
