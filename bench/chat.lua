-- wrk script: POST a small chat completion. Env: MODEL, AUTH (bearer key), BODY_STREAM=1, HDRS="k:v;k:v".
wrk.method = "POST"
local stream = os.getenv("BODY_STREAM") == "1"
wrk.body = '{"model":"' .. (os.getenv("MODEL") or "mock-1") .. '","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in one short sentence."}]' .. (stream and ',"stream":true' or '') .. '}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("AUTH") or "sk-bench")
local extra = os.getenv("HDRS")
if extra then
  for k, v in string.gmatch(extra, "([^:;]+):([^;]+)") do wrk.headers[k] = v end
end
-- MEMORY_IDS=N: rotate a memoryId header over N conversations (one per connection at c=N)
local memory_ids = tonumber(os.getenv("MEMORY_IDS") or "0")
local counter = 0
if memory_ids > 0 then
  request = function()
    counter = counter + 1
    wrk.headers["memoryId"] = "bench-" .. (counter % memory_ids)
    return wrk.format()
  end
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT rps=%.1f p50_ms=%.3f p99_ms=%.3f errors=%d non2xx=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status))
end
