#!/usr/bin/env bash
# aspnet_req.sh - ASP.NET Core's request events read by launcher/trace/aspnet_req.h from a real runtime: the webapp
# traced through the agent's POST /trace for 5 s with a providers document holding exactly the provider
# aspnet_req_provider adds (aspnet_req_driver.c prints it, and checks it reads back as that provider), while
# requests hit / and a path that is not there; the nettrace kept, then read by the driver (evpayload_decode,
# aspnet_req_event, the three triggers):
#   trace/*      the document is the provider; the trace is 200 and whole (diagport nettrace stats)
#   events/*     every payload decodes; a Start and a Stop for each request, with its path; / answered 200,
#                the missing path 404; each Stop's activity ID is a Start's; durations positive
#   triggers/*   over those events: AspNetRequestCount (IncludePaths "/", 3), AspNetResponseStatus
#                ("400-499", 3) and AspNetRequestDuration (0 s, 3) are satisfied; a count trigger whose
#                ExcludePaths take every path is not
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=aspnet-req
. tests/lib.sh
agent_setup aspnet-req
build_apps
CFLAGS_PKG=$(pkg-config --cflags jansson yaml-0.1 libcurl libseccomp)
LIBS_PKG="$(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread"
# shellcheck disable=SC2086
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -I. -Icommon $CFLAGS_PKG -o "$W/driver" tests/integration/aspnet_req_driver.c \
	"$B/libdiagport.a" $LIBS_PKG 2> "$W/cc.log" || { fail build-driver "$(head -c 300 "$W/cc.log")"; exit 0; }

start_agent
if ! start_webapp "$W/app.out" "$W/dumps/port" "$U"; then
	fail setup "the webapp did not start or attach: $(tail -3 "$W/app.out") $(tail -3 "$W/agent.log")"
	exit 0
fi

"$W/driver" providers > "$W/doc.json" 2> "$W/doc.err"; rc=$?
WHY="rc $rc: $(cat "$W/doc.err")"; check trace/document-is-the-provider test "$rc" = 0
WHY="$(cat "$W/doc.json")"
check trace/document-one-provider jq -e '(.providers | length) == 1 and .providers[0].name == "Microsoft-Diagnostics-DiagnosticSource"
	and .requestRundown == false' "$W/doc.json"

MISSING=/no/such/page-$RANDOM
curl -s -D "$W/trace.hdr" -o "$W/aspnet.nettrace" -w '%{http_code}' -H 'Content-Type: application/json' \
	--data-binary "@$W/doc.json" "$U/trace?pid=$APID&durationSeconds=5" > "$W/trace.code" 2> "$W/trace.err" &
TP=$!
# the session is on before the requests: the agent answers 200 once the runtime has started it (a fixed 1.5 s
# was too short on a loaded machine: the first request went unseen)
wait_for "$W/trace.hdr" '^HTTP/1.1 200' 15
OK=0 NF=0
for _ in $(seq 1 5); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$AURL/")" = 200 ] && OK=$((OK + 1))
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$AURL$MISSING")" = 404 ] && NF=$((NF + 1))
	sleep 0.2
done
wait $TP
WHY="answered 200 to $OK of 5 requests for /, 404 to $NF of 5 for $MISSING"; check trace/requests-answered test "$OK:$NF" = 5:5
WHY="$(cat "$W/trace.code") $(cat "$W/trace.err")"; check trace/200 test "$(cat "$W/trace.code")" = 200
"$D" nettrace stats "$W/aspnet.nettrace" > "$W/stats.json" 2> "$W/stats.err"; rc=$?
WHY="rc $rc: $(cat "$W/stats.err")"; check trace/whole test "$rc" = 0

"$W/driver" read "$W/aspnet.nettrace" > "$W/events.txt" 2> "$W/events.err"; rc=$?
WHY="rc $rc: $(head -c 300 "$W/events.err")"; check events/read test "$rc" = 0
WHY="$(grep decode-errors "$W/events.txt") $(head -c 300 "$W/events.err")"
check events/payloads-decode grep -qx 'decode-errors 0' "$W/events.txt"
n_start_root=$(awk '$1 == "START" && $3 == "/"' "$W/events.txt" | wc -l)
n_start_nf=$(awk -v p="$MISSING" '$1 == "START" && $3 == p' "$W/events.txt" | wc -l)
n_stop_root=$(awk '$1 == "STOP" && $3 == "/" && $4 == 200 && $5 > 0' "$W/events.txt" | wc -l)
n_stop_nf=$(awk -v p="$MISSING" '$1 == "STOP" && $3 == p && $4 == 404 && $5 > 0' "$W/events.txt" | wc -l)
n_stop=$(awk '$1 == "STOP"' "$W/events.txt" | wc -l)
SUMMARY="starts / $n_start_root, $MISSING $n_start_nf; stops / 200 $n_stop_root, $MISSING 404 $n_stop_nf, all $n_stop;
	$(head -4 "$W/events.txt" | tr '\n' ';')"
WHY="$SUMMARY"; check events/starts test "$n_start_root:$n_start_nf" = 5:5
WHY="$SUMMARY"; check events/stop-200-for-root test "$n_stop_root" = 5
WHY="$SUMMARY"; check events/stop-404-for-missing test "$n_stop_nf" = 5
WHY="$SUMMARY"; check events/no-other-stops test "$n_stop" = 10
# each Stop pairs with a Start by activity ID, on the same path
unpaired=$(awk '$1 == "START" {s[$2] = $3} $1 == "STOP" && s[$2] != $3 {n++} END {print n + 0}' "$W/events.txt")
ids=$(awk '$1 == "START" {print $2}' "$W/events.txt" | sort -u | wc -l)
WHY="$unpaired stops without their start; $ids distinct activity IDs"
check events/stops-pair-with-starts test "$unpaired:$ids" = 0:10
for tr in count status duration; do
	WHY="$(grep '^trigger' "$W/events.txt" | tr '\n' ' ')"; check "triggers/$tr" grep -qx "trigger $tr yes" "$W/events.txt"
done
WHY="$(grep '^trigger' "$W/events.txt" | tr '\n' ' ')"; check triggers/excluded-paths grep -qx 'trigger none no' "$W/events.txt"
