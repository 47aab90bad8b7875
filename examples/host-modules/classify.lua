-- One script for several tables: each table's params (sluice.config) say
-- what "slow" is for it and which region it serves.
local log = require("log")
local stats = require("stats")
local sluice = require("sluice")

local slow_ms = sluice.config("slow_ms") or 1000
local region = sluice.config("region") or "unknown"

function main(row)
  local ms = tonumber(row.ms) or 0
  stats.inc("requests", 1, {region = region})
  stats.observe("latency_seconds", ms / 1000)
  if ms >= slow_ms then
    stats.inc("slow")
    log.warn("slow request", {path = row.path, ms = ms, slow_ms = slow_ms})
    return "slow"
  end
  return "ok"
end
