-- wrk script for bench/api_latency.sh: every connection's requests rotate
-- through the paths given after "--" on the wrk command line, e.g.
--   wrk -s bench/api_latency_mixed.lua http://127.0.0.1:8470/ -- /a /b?x=1 /c
-- With "--bust" as the first of them, each request gets a never-repeated
-- query parameter (nc=N), which the server ignores but which makes every URL
-- new to its answer cache: this measures answers computed from the database.
local paths = {}
local bust = false
local i = 0
local n = 0

-- setup runs in the main Lua state, once per thread: give each thread an id
local threads = 0
function setup(thread)
	threads = threads + 1
	thread:set("id", threads)
end

function init(args)
	for _, p in ipairs(args) do
		if p == "--bust" then
			bust = true
		else
			paths[#paths + 1] = p
		end
	end
	if #paths == 0 then
		error("api_latency_mixed.lua: give the paths after --")
	end
	-- each thread starts at a different path; nc= carries the thread id
	i = (id or 1) % #paths
end

function request()
	i = i % #paths + 1
	local p = paths[i]
	if bust then
		n = n + 1
		p = p .. (p:find("?", 1, true) and "&" or "?") .. "nc=" .. (id or 1) .. "_" .. n
	end
	return wrk.format("GET", p)
end
