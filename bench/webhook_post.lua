-- bench/webhook_post.lua - wrk script for bench/webhook.sh: POST the AdmissionReviews whose files are
-- listed in $BODIES (one path per line), one after another, and print one machine-readable line at
-- the end. The requests are built once, when a thread starts; of the two threads (wrk -t2), the first
-- sends the 1st, 3rd, 5th... body and the second the others, so they never send the same one.
local paths = {}
for line in io.lines(os.getenv("BODIES")) do
	paths[#paths + 1] = line
end
local reqs, idx = {}, 1
local counter = 0

function setup(thread)
	thread:set("tid", counter)
	counter = counter + 1
end

function init(args)
	local headers = { ["Content-Type"] = "application/json", ["Accept"] = "application/json" }
	for i, p in ipairs(paths) do
		if (i - 1) % 2 == (tid or 0) % 2 or #paths == 1 then -- bench/webhook.sh runs wrk -t2
			local f = assert(io.open(p, "rb"))
			reqs[#reqs + 1] = wrk.format("POST", nil, headers, f:read("*a"))
			f:close()
		end
	end
end

function request()
	local r = reqs[idx]
	idx = idx % #reqs + 1
	return r
end

function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format("WRK requests %d duration_us %d bytes %d connect %d read %d write %d status %d timeout %d\n",
		summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout))
end
