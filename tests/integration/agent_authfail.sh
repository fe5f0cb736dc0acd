#!/usr/bin/env bash
# agent_authfail.sh - failed authentication is visible and slow (issue 33), against the real agent:
#   short/*     a token under 16 bytes stops the agent at start (exit 2), from a file or DIAGPORT_AUTH_TOKEN: the
#               message names the file or the variable and the minimum, never the token; 16 bytes start
#   slow/*      500 wrong tokens from one address (127.0.0.3) take far longer than 500 right ones (a timed check: the
#               defect is a wait; the margin is wide: the schedule allows at most 10 refusals a second once past the
#               first few, the right ones take well under a second here); meanwhile a right client from another
#               address (127.0.0.2) and /healthz from the attacking address itself stay fast (each answer within
#               1 s, where the attacker's wait in line is long: the held requests take no worker)
#   log/*       the refusals are logged with the peer address, rate-limited (a line per address per 5 s at most,
#               with the count of lines left out), and no byte of a token in the log
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-authfail
. tests/lib.sh
agent_setup authfail

# ---- short/*
short() { # NAME WANT [ENV=V...] -- ARGS
	local name=$1 want=$2 rc
	shift 2
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]+"${envs[@]}"}" "$D" launch --socket "$W/s-$name" --dumps "$W" --urls http://127.0.0.1:0 "$@" \
		> /dev/null 2> "$W/short-$name.err"
	rc=$?
	WHY="exit $rc: $(cat "$W/short-$name.err")"
	check "short/$name" bash -c "test $rc = 2 && grep -qF -- '$want' '$W/short-$name.err' && grep -q 'shorter than 16 bytes' \
		'$W/short-$name.err' && ! grep -q 'Tiny-Tok3n' '$W/short-$name.err'"
}
printf 'Tiny-Tok3n-15by\n' > "$W/short.tok" # 15 bytes (the newline is not the token's)
short file "the token in $W/short.tok" -- --auth-token-file "$W/short.tok"
short env "environment variable DIAGPORT_AUTH_TOKEN" DIAGPORT_AUTH_TOKEN=Tiny-Tok3n --
printf 'Exactly-16-bytes' > "$W/ok16.tok"
start_agent --auth-token-file "$W/ok16.tok"
WHY="$(tail -3 "$W/agent.log")"; check short/16-bytes-start test "$(code -H 'Authorization: Bearer Exactly-16-bytes' "$U/processes")" = 200
kill "$AG" 2> /dev/null
wait "$AG" 2> /dev/null

# ---- slow/* and log/*
RIGHT=authfail-right-token-$RANDOM$RANDOM-0123456789
WRONG=guess-Zq8Xw3Kp-not-the-token
printf '%s\n' "$RIGHT" > "$W/token"
start_agent --auth-token-file "$W/token"
python3 - "$P" "$RIGHT" "$WRONG" > "$W/timing.json" 2> "$W/timing.err" << 'EOF'
import http.client, json, sys, threading, time
port, right, wrong = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def one(src, path, token):
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, source_address=(src, 0), timeout=60)
    c.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, time.monotonic() - t

def run(n, src, path, token):
    t, codes, worst = time.monotonic(), {}, 0.0
    for _ in range(n):
        st, dt = one(src, path, token)
        codes[str(st)] = codes.get(str(st), 0) + 1
        worst = max(worst, dt)
    return {"s": time.monotonic() - t, "codes": codes, "worst": worst}

out = {"right": run(500, "127.0.0.1", "/processes", right)}
res = {}
th = threading.Thread(target=lambda: res.update(wrong=run(500, "127.0.0.3", "/processes", wrong)))
th.start()
time.sleep(3)  # the attacker past its first few free tries: its requests now wait their turn
out["other"] = run(100, "127.0.0.2", "/processes", right)
out["healthz"] = run(100, "127.0.0.3", "/healthz", None)
th.join()
out["wrong"] = res["wrong"]
print(json.dumps(out))
EOF
WHY="$(cat "$W/timing.json" "$W/timing.err")"
check slow/all-answered jq -e '.right.codes == {"200": 500} and .wrong.codes == {"401": 500} and .other.codes == {"200": 100} and .healthz.codes == {"200": 100}' "$W/timing.json"
check slow/wrong-much-slower jq -e '.wrong.s > 30 and .wrong.s > 10 * .right.s' "$W/timing.json"
check slow/other-peer-fast jq -e '.other.worst < 1' "$W/timing.json"
check slow/healthz-fast jq -e '.healthz.worst < 1' "$W/timing.json"
WHY="$(tail -3 "$W/agent.log")"; check slow/still-serving test "$(code -H "Authorization: Bearer $RIGHT" "$U/processes")" = 200

grep '"event":"auth-failed"' "$W/agent.log" > "$W/fails.log"
n=$(grep -c '"peer":"127.0.0.3"' "$W/fails.log")
secs=$(jq -r '.wrong.s | floor' "$W/timing.json")
WHY="$n lines in $secs s: $(head -3 "$W/fails.log")"
check log/peer-logged grep -q '"level":"WARN","msg":"authentication failed","event":"auth-failed","peer":"127.0.0.3","path":"/processes","reason":"wrong token"' "$W/fails.log"
check log/rate-limited test "$n" -ge 2 -a "$n" -le $((secs / 5 + 2))
check log/suppressed-count bash -c "grep '\"peer\":\"127.0.0.3\"' '$W/fails.log' | jq -e 'select(.suppressed > 0)' | grep -q ."
WHY="$(jq -s 'map(.suppressed + 1) | add' < <(grep '"peer":"127.0.0.3"' "$W/fails.log")) counted"
# every refusal is accounted for: the lines' own plus the ones they say were left out (the last ones may be pending)
check log/counts-add-up bash -c "grep '\"peer\":\"127.0.0.3\"' '$W/fails.log' | jq -s -e 'map(.suppressed + 1) | add | . > 400 and . <= 500'"
check log/no-token-bytes bash -c "! grep -qF -e 'Zq8Xw3Kp' -e 'not-the-token' -e '$RIGHT' -e 'authfail-right' '$W/agent.log'"
check log/right-peers-quiet bash -c "! grep -qE '\"peer\":\"127\\.0\\.0\\.(1|2)\"' '$W/fails.log'"
