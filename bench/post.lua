-- wrk script: POST the JSON body read from the file named by $BENCH_BODY, and print one
-- machine-readable summary line (latencies in microseconds) for bench/wrk.py to parse.
local file = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH_JSON {\"requests\":%d,\"duration_us\":%d,\"bytes\":%d,\"connect\":%d,\"read\":%d,"
      .. "\"write\":%d,\"status\":%d,\"timeout\":%d,\"p50_us\":%d,\"p99_us\":%d,\"max_us\":%d}\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
