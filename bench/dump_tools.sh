#!/usr/bin/env bash
# bench/dump_tools.sh - a Full dump through the agent beside `dotnet-dump collect` on the same process.
# Measures and prints; never gates.
#
# One agent started as `diagport launch -- dotnet webapp.dll` (the app its child, as in a container), the
# webapp holding HEAP_MB MB more in LeakedBuffer objects (/memory-leak). RUNS rounds, each taking, in an
# order that rotates by round:
#   agent-file     GET /dump?type=Full (the default transport: straight from createdump's pipe while the client
#                  keeps up, the rest staged, chunked), curl -o a file in the same directory dotnet-dump writes to
#   agent-null     the same, curl -o /dev/null
#   agent-staged   GET /dump?type=Full&transport=staged (sent once whole, Content-Length), curl -o a file
#   capture        diagport capture dump --type Full --target URL -o DIR (the fleet client: the file, its SHA-256
#                  and manifest.json)
#   dotnet-dump    build/tools/dotnet-dump/dotnet-dump collect -p PID --type Full -o a file
# Per dump: wall time from the start of the client (curl, or dotnet-dump: its own start-up included) to its
# exit; peak RSS of the client (/usr/bin/time %M) and, for the agent, its peak RSS during the dump (VmHWM,
# reset before each dump through /proc/PID/clear_refs, so root only) minus nothing: what it held at its peak.
# Every artifact must be an ELF core within 10 % of the first one; otherwise the script stops with status 1.
#
#   bash bench/dump_tools.sh          (after `make` and `bash scripts/prereqs.sh test`)
# Knobs: RUNS (5), HEAP_MB (170), DIAGPORT (./diagport), BUILD (build). Figures go to docs/BENCHMARKS.md by hand
# ("Dumps beside dotnet-dump").
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
RUNS=${RUNS:-5}
HEAP_MB=${HEAP_MB:-170}
DD=$B/tools/dotnet-dump/dotnet-dump
W=$(mktemp -d /tmp/dp-dumptools.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

[ -x "$D" ] || die "$D not found (run make)"
[ -x "$DD" ] || die "$DD not found (run bash scripts/prereqs.sh test)"
[ "$(id -u)" = 0 ] || die "needs root: the agent's peak RSS is reset through /proc/PID/clear_refs"
bash tests/apps/build.sh "$B/apps" >/dev/null || die "cannot build the test apps"
chmod 755 "$W"
mkdir -m 0777 "$W/dumps" "$W/out"


P=$(free_port); U=http://127.0.0.1:$P; AP=$(free_port)
ASPNETCORE_URLS=http://127.0.0.1:$AP "$D" launch --no-metrics --socket "$W/dumps/port" --dumps "$W/dumps" --urls "$U" \
	--no-auth -- dotnet "$B/apps/webapp/webapp.dll" >"$W/app.out" 2>"$W/agent.log" &
AG=$!; PIDS+=("$AG")
for _ in $(seq 1 300); do grep -q '^READY' "$W/app.out" && break; sleep 0.1; done
APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
[ -n "$APID" ] || die "the webapp did not start: $(tail -3 "$W/app.out") $(tail -3 "$W/agent.log")"
for _ in $(seq 1 100); do curl -s "$U/processes" | grep -q "\"pid\":$APID," && break; sleep 0.05; done
held=$(curl -s "http://127.0.0.1:$AP/memory-leak?mb=$HEAP_MB")

echo "== a Full dump through the agent beside dotnet-dump collect: $(date -u +%FT%TZ), $(nproc) cores," \
	"$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -r)"
echo "diagport $(cat VERSION) ($(git rev-parse --short HEAD 2>/dev/null)); dotnet-dump $("$DD" --version 2>/dev/null | head -1);" \
	".NET $(dotnet --list-runtimes | awk '/NETCore.App/ {v=$2} END {print v}')"
echo "app: webapp (agent's child) pid $APID holding $held MB in LeakedBuffer; VmRSS $(awk '/^VmRSS/ {printf "%.0f MiB", $2 / 1024}' "/proc/$APID/status");" \
	"files on $(df --output=fstype "$W" | tail -1); $RUNS rounds"
load

REF=
# one WAY RUN: one dump, one line in $W/results: way run seconds client_kib agent_kib bytes
one() {
	local way=$1 run=$2 out=$W/out/core.$1 t0 t1 rss agent=0 bytes=0 code=200
	rm -rf "$W/out/"core.* "$W/out/cap"
	echo 5 >"/proc/$AG/clear_refs"
	t0=$(date +%s.%N)
	case $way in
	agent-file) code=$(/usr/bin/time -f %M -o "$W/rss" curl -s -o "$out" -w '%{http_code}' "$U/dump?pid=$APID&type=Full") ;;
	agent-null) read -r code bytes <<<"$(/usr/bin/time -f %M -o "$W/rss" curl -s -o /dev/null -w '%{http_code} %{size_download}' "$U/dump?pid=$APID&type=Full")" ;;
	agent-staged) code=$(/usr/bin/time -f %M -o "$W/rss" curl -s -o "$out" -w '%{http_code}' "$U/dump?pid=$APID&type=Full&transport=staged") ;;
	capture) /usr/bin/time -f %M -o "$W/rss" "$D" capture dump --type Full --target "$U" -o "$W/out/cap" >"$W/cap.out" 2>&1 || code=$? ;;
	dotnet-dump) /usr/bin/time -f %M -o "$W/rss" "$DD" collect -p "$APID" --type Full -o "$out" >"$W/dd.out" 2>&1 || code=$? ;;
	esac
	t1=$(date +%s.%N)
	if [ "$way" = capture ]; then # the artifact, checked against the manifest's SHA-256 (not timed)
		out=$(ls "$W/out/cap/"*.dmp 2>/dev/null | head -1)
		[ -n "$out" ] && [ "$(jq -r '.items[0].sha256' "$W/out/cap/manifest.json")" = "$(sha256sum "$out" | cut -d' ' -f1)" ] ||
			die "capture run $run: no artifact whose SHA-256 is the manifest's: $(tail -2 "$W/cap.out")"
	fi
	rss=$(tail -1 "$W/rss")
	[ "$way" = dotnet-dump ] || agent=$(awk '/^VmHWM/ {print $2}' "/proc/$AG/status")
	[ "$code" = 200 ] || die "$way run $run: status $code; $(tail -2 "$W/agent.log") $(tail -2 "$W/dd.out")"
	if [ "$way" != agent-null ]; then
		file -b "$out" | grep -q 'ELF 64-bit LSB core' || die "$way run $run: not an ELF core: $(file -b "$out")"
		bytes=$(stat -c %s "$out")
	fi
	[ -n "$REF" ] || REF=$bytes
	awk -v b="$bytes" -v r="$REF" 'BEGIN {exit !(b > 0.9 * r && b < 1.1 * r)}' || die "$way run $run: $bytes bytes, not within 10 % of $REF"
	echo "$way $run $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}') $rss $agent $bytes" | tee -a "$W/results" |
		awk '{printf "   %-13s run %d: %.3f s, client peak RSS %d KiB, agent peak RSS %s, %d bytes\n", $1, $2, $3, $4, ($5 ? $5 " KiB" : "-"), $6}'
	rm -rf "$W/out/"core.* "$W/out/cap"
	sleep 0.5
}

WAYS=(agent-file agent-null agent-staged capture dotnet-dump)
echo; echo "== warm-up (not counted): one of each"
for w in "${WAYS[@]}"; do one "$w" 0; done
: >"$W/results"
echo; echo "== $RUNS rounds, the order rotating"
for run in $(seq 1 "$RUNS"); do
	for i in "${!WAYS[@]}"; do one "${WAYS[$(((i + run) % ${#WAYS[@]}))]}" "$run"; done
done
echo; echo "== medians [min-max] over $RUNS runs"
printf "%-13s %-24s %-28s %s\n" way "seconds" "client peak RSS KiB" "agent peak RSS KiB"
for w in "${WAYS[@]}"; do
	sel() { awk -v w="$w" -v k="$1" '$1 == w {print $k}' "$W/results" | stat3; }
	read -r tm tl th <<<"$(sel 3)"; read -r cm cl ch <<<"$(sel 4)"; read -r am al ah <<<"$(sel 5)"
	printf "%-13s %-24s %-28s %s\n" "$w" "$(printf '%.3f [%.3f-%.3f]' "$tm" "$tl" "$th")" \
		"$(printf '%d [%d-%d]' "$cm" "$cl" "$ch")" "$( [ "$w" = dotnet-dump ] && echo - || printf '%d [%d-%d]' "$am" "$al" "$ah")"
done
echo "dump size: $(awk '{print $6}' "$W/results" | stat3 | awk '{printf "%d bytes [%d-%d]", $1, $2, $3}')"
# the target's ratio both ways: of the medians, and the median of each round's own ratio (the load drifts)
rd=$(awk '$1 == "dotnet-dump" {print $3}' "$W/results" | stat3 | cut -d' ' -f1)
for w in agent-file agent-null capture; do
	rf=$(awk -v w="$w" '$1 == w {print $3}' "$W/results" | stat3 | cut -d' ' -f1)
	echo "$w / dotnet-dump: $(awk -v a="$rf" -v b="$rd" 'BEGIN {printf "%.2f", a / b}') (medians);" \
		"$(awk -v w="$w" '$1 == w {f[$2] = $3} $1 == "dotnet-dump" {d[$2] = $3} END {for (r in f) print f[r] / d[r]}' "$W/results" |
			stat3 | awk '{printf "%.2f [%.2f-%.2f]", $1, $2, $3}') (each round's own)"
done
load
exit 0
