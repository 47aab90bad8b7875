//go:build luajit && cgo

package luajit

import (
	"testing"
	"time"
)

// TestPatternsRandomMatchLuaJIT: random patterns drawn from pattern syntax
// (classes, sets, anchors, quantifiers, captures, %b, %f, NUL) on random
// subjects give what LuaJIT's own find, match, gmatch and gsub (string,
// table and function replacements, init and max n) give, errors word for
// word. FuzzPatternsMatchLuaJIT mutates bytes blindly (coverage of the C
// side is not seen); this reaches the corners faster. Raise the count of
// cases below for a longer run (3 million agreed when the matcher was
// written).
func TestPatternsRandomMatchLuaJIT(t *testing.T) {
	s := load(t, `local S = require("string")
local palph = {"a","b","x","(",")","[","]","^","$","%",".","*","+","-","?","f","b","z","1","2","0","a","%a","%A","%d","%w","%s","%g","%p","%x","%c","%u","%l","%z","\0"," ","-","[^","%b()","%f[%w]","()","A","9","\200", "%%"}
local salph = {"a","b","x","(",")","[","]","^","$","%"," ","1","2","0","A","\0","\200","-","."}
local function pack(ok, ...)
  local t = {tostring(ok)}
  for i = 1, select("#", ...) do t[#t + 1] = tostring((select(i, ...))) end
  return table.concat(t, ",")
end
local function gm(lib, s, p)
  local ok, it = pcall(lib.gmatch, s, p)
  if not ok then return "error" end
  local out, n = {}, 0
  while n < 50 do
    local ok2, a, b = pcall(it)
    if not ok2 then return "error " .. tostring(a) end
    if a == nil then break end
    n = n + 1
    out[n] = tostring(a) .. "|" .. tostring(b)
  end
  return table.concat(out, ",")
end
local function rnd(alph, n)
  local t = {}
  for i = 1, math.random(0, n) do t[i] = alph[math.random(#alph)] end
  return table.concat(t)
end
function main(row)
  math.randomseed(row.seed)
  for iter = 1, row.cases do
    local p, s = rnd(palph, 7), rnd(salph, 14)
    local init = math.random(-20, 20)
    for _, c in ipairs({{"find", s, p, init}, {"match", s, p, init}, {"gsub", s, p, "<%0%1>", math.random(-1, 5)}, {"gsub", s, p, {a = "T"}}, {"gsub", s, p, function(a, b) return b end}}) do
      local a, b = pack(pcall(string[c[1]], c[2], c[3], c[4], c[5])), pack(pcall(S[c[1]], c[2], c[3], c[4], c[5]))
      if a ~= b then return c[1] .. " " .. string.format("%q %q", s, p) .. ": " .. a .. " vs " .. b end
    end
    local a, b = gm(string, s, p), gm(S, s, p)
    if a ~= b then return "gmatch " .. string.format("%q %q", s, p) .. ": " .. a .. " vs " .. b end
  end
  return "same"
end`, Config{Allow: []string{"require"}, Timeout: 60 * time.Second})
	for seed := 1; seed <= 2; seed++ {
		out, errs := run(t, s, map[string]any{"seed": seed, "cases": 5000})
		if errs[0] != nil || out[0] != "same" {
			t.Errorf("seed %d: %v %v", seed, out[0], errs[0])
		}
	}
}
