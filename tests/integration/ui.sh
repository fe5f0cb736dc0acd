#!/usr/bin/env bash
# ui.sh - `diagport ui` in a real browser: Debian's Chromium, headless, driven by playwright-core
# (tests/validate/ui-browser.mjs), against the real binary serving its page for a real agent (with a token)
# and the real test webapp (tests/apps/webapp). The checks, one result line each (ui-browser.mjs says how):
#   secret-cookie        the printed URL sets the HttpOnly, SameSite=Strict cookie and leaves the address bar
#   process-row          the webapp is a table row named "TARGET · PID webapp"
#   mode-dash            a static target's Mode cell is a dash with a title saying why
#   keyboard-open        Enter on the focused row opens its process view
#   live-charts          the process's counters are charted live (a value in each System.Runtime chart)
#   cpu-scale            the CPU chart's scale tops at 100 % (not 110)
#   cpu-profile-idle     a 2 s CPU profile of the app idle, opened when done (the base of cpu-diff)
#   keyboard-capture     Tab reaches the "CPU profile" button, Enter starts a capture (listed, with progress)
#   flame-graph          the profile opens as role img "flame graph", its top-frames table leads with
#                        HotLoop.Spin (the app spins in it: /high-cpu)
#   flame-search         the search says how many frames match and their share of samples, into the fragment
#   frames-arrows        ArrowDown and ArrowUp move between the frames table's rows
#   flame-zoom-keyboard  Enter on a frames-table row zooms to it (the table says under what; z= in the fragment)
#   frames-refocus       after that Enter the focus is on the same frame's row (not dropped to <body>)
#   fragment-reopens     the same URL in a new tab: same process, artifact, zoom and search
#   escape-resets-zoom   Escape resets the zoom
#   link-from-elsewhere  a link to a view (with its fragment) on a page of another origin: followed in this browser
#                        (the cookie is SameSite=Strict: not sent) the gate continues to the same view; in a fresh
#                        browser without the cookie it stays on the gate, its link and why, without a loop
#   cpu-diff             the spinning profile compared with the idle one: a diff flame graph whose table puts
#                        HotLoop.Spin first, marked as grown
#   stacks-diff          two stack listings compared: a diff flame graph, its table by growth
#   heap-diff-leak-first two GC heap snapshots around the app's retaining 100,000 more LeakedOrder objects
#                        (/leak-objects): compared, LeakedOrder is the first row, its count +100,000
#   dump-download-elf    a Mini dump downloads (a browser download) and is an ELF core (e_type 4)
#   capture-refused      a trace of 5000 s: the server's refusal (its problem's detail) shown, nothing listed
#   cancel               a running 60 s trace's Cancel button: its row says cancelled, no download
#   flame-parse          flame.js in the page reads folded stacks (CRLF, spaces in names, recursion counted once
#                        in a total, lines without a count or with Infinity, NaN or a negative one skipped) and
#                        stack listings (innermost frame first); fmtCount gives '?' for what is not a number
#   no-cookie-403        without the cookie every request is refused: 403, no body for the API (and a wrong secret),
#                        the gate page (no data, continue.js's link) for a page
#   foreign-origin-403   with the cookie but another Origin (or none), POST and DELETE are refused: 403
#   token-not-in-page    the agent's token is in no answer the page got
#   page-clean           no script error, no Content-Security-Policy violation
# and against a second `diagport ui` whose targets are a hostile stand-in agent (hostile_agent.py markup: markup in
# every string, strings where numbers belong, Infinity counts, an endless live record) and the real agent named
# with a wrong token (it refuses):
#   hostile-text         its process, crashes, exceptions, GC heap and CPU profile views show the markup as text:
#                        no element of it exists, no navigation happens; '?' for its non-numbers; the profile's
#                        Infinity, NaN and negative counts are skipped (8 samples)
#   hostile-ended-early  its CPU profile, over at once, is listed as ended after 0 s of 10
#   crashes-wrap         its crash's 400-character unbroken message wraps inside the Crashes card
#   live-record-cap      its live stream of 100 KiB without a record end is dropped, and the page says so
#   refused-by-agent     the real agent's refusal (401) of live counters and exceptions: its sentence is shown,
#                        not "your session has ended"
# A screenshot of each view is kept in $B/ui-screenshots (test artifacts). UI_DOC_PNG=FILE also writes the
# flame graph view there: how docs/ui.png was made.
set -u
cd "$(dirname "$0")/../.."
T_NAME=ui
. tests/lib.sh
agent_setup ui
build_apps
[ -x /usr/bin/chromium ] || { fail chromium "no /usr/bin/chromium (bash scripts/prereqs.sh test)"; exit 0; }
[ -f tests/validate/node_modules/playwright-core/package.json ] ||
	{ fail playwright "no playwright-core in tests/validate/node_modules (bash scripts/prereqs.sh test)"; exit 0; }

printf 'ui-test-token-%s\n' "$RANDOM$RANDOM$RANDOM" > "$W/token"
chmod 600 "$W/token"
start_agent --metrics-interval 1 --auth-token-file "$W/token"
TOKEN=$(cat "$W/token")
start_webapp "$W/app.out" "$W/dumps/port" "$U" -H "Authorization: Bearer $TOKEN" ||
	{ fail setup "the webapp did not start or attach: $(tail -3 "$W/app.out")"; exit 0; }

TMPDIR=$W "$D" ui --target "$U" --token-file "$W/token" > "$W/ui.out" 2> "$W/ui.log" &
UIPID=$!
PIDS+=("$UIPID")
if ! UI_URL=$(ui_url "$W/ui.out" 60); then
	fail ui-start "diagport ui printed no URL within 60 s: $(head -c 300 "$W/ui.out")" "$W/ui.log"
	exit 0
fi

# the second UI: a hostile stand-in agent (named hostile) and the real agent with a wrong token (refusing)
python3 tests/integration/hostile_agent.py markup "$W/hostile.port" > "$W/hostile.out" 2>&1 &
PIDS+=("$!")
wait_for "$W/hostile.port" '[0-9]' 10 || { fail setup "hostile_agent.py did not start" "$W/hostile.out"; exit 0; }
printf 'not-the-token\n' > "$W/wrong-token"
chmod 600 "$W/wrong-token"
printf 'http://127.0.0.1:%s name=hostile\n%s name=refusing token-file=%s\n' "$(cat "$W/hostile.port")" "$U" \
	"$W/wrong-token" > "$W/hostile-targets"
TMPDIR=$W "$D" ui --targets-file "$W/hostile-targets" > "$W/ui2.out" 2> "$W/ui2.log" &
PIDS+=("$!")
if ! HOSTILE_UI=$(ui_url "$W/ui2.out" 60); then
	fail ui-start "the second diagport ui printed no URL within 60 s: $(head -c 300 "$W/ui2.out")" "$W/ui2.log"
	exit 0
fi

SHOTS=$PWD/$B/ui-screenshots
[ "${B#/}" != "$B" ] && SHOTS=$B/ui-screenshots
mkdir -p "$SHOTS" && rm -f "$SHOTS"/*.png
UI_URL=$UI_URL HOSTILE_UI=$HOSTILE_UI AGENT_URL=$U APP_URL=$AURL APP_PID=$APID APP_NAME=webapp SHOTS=$SHOTS PREFIX=integration/$T_NAME TOKEN=$TOKEN \
	DOC_PNG=${UI_DOC_PNG:+$(realpath -m "$UI_DOC_PNG")} CHROMIUM=/usr/bin/chromium \
	node tests/validate/ui-browser.mjs > "$W/browser.out" 2> "$W/browser.err"
rc=$?
grep '^\(PASS\|FAIL\) ' "$W/browser.out"
if ! grep -q '^\(PASS\|FAIL\) ' "$W/browser.out"; then
	fail browser "ui-browser.mjs gave no result (exit $rc)" "$W/browser.err"
elif [ "$rc" != 0 ] && ! grep -q '^FAIL ' "$W/browser.out"; then
	fail browser "ui-browser.mjs exited $rc without a FAIL line" "$W/browser.err"
fi
if grep -q '^FAIL ' "$W/browser.out"; then
	echo "    diagport ui's log:"
	head -n 40 "$W/ui.log" | sed 's/^/    /'
fi
check ui-alive kill -0 "$UIPID"
