-- bench/webhook_post.lua - wrk script for bench/webhook.sh: POST the file named by $BODY
-- (an AdmissionReview) on every request, and print one machine-readable line at the end.
local f = assert(io.open(os.getenv("BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"

function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format("WRK requests %d duration_us %d bytes %d connect %d read %d write %d status %d timeout %d\n",
		summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout))
end
