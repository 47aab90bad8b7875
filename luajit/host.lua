-- The host side of the LuaJIT engine, run once per VM with every standard
-- library open, before any user code. It keeps what it needs (ffi above all)
-- in locals of this chunk, builds the sandbox user code runs in, and returns
-- the functions the Go side calls: init (run a script's main chunk) and run
-- (call a function on every row of a batch). User code never sees this
-- chunk's locals, the real globals, package.loaded or ffi (unless allowed).
local baddr, apiaddr, memlimit_kb, allowlist, make_encoder, make_decoder, gctotal_addr, make_patterns, maxresult, paramsjson = ...

local ffi = require("ffi")
local tclear = require("table.clear")
local tnew = require("table.new")
local ffi_string, ffi_copy, ffi_cast = ffi.string, ffi.copy, ffi.cast
local type, tostring, next, error, rawget, rawset = type, tostring, next, error, rawget, rawset
local setmetatable, getmetatable, setfenv = setmetatable, getmetatable, setfenv
local pcall, xpcall, select, tonumber = pcall, xpcall, select, tonumber
local traceback, getinfo = debug.traceback, debug.getinfo
local collectgarbage, loadstring = collectgarbage, loadstring
local tsort, tconcat_host = table.sort, table.concat
local sbyte, ssub, sfind, schar = string.byte, string.sub, string.find, string.char
local floor, huge = math.floor, math.huge
local real_require = require
local G = _G

ffi.cdef [[
typedef struct sl_batch {
	uint8_t *tag; double *num; int32_t *off; int32_t *len; int64_t cells_cap;
	int32_t *name_off; int32_t *name_len; int32_t *order; int64_t cols_cap;
	char *arena; int64_t arena_len, arena_cap;
	int32_t nrows, ncols; int32_t all;
	volatile int32_t cur; volatile int32_t stop; int32_t done;
	uint8_t *rtag; double *rnum; int64_t *roff; int64_t *rlen; int64_t rcap;
	char *out; int64_t out_len, out_cap;
	char *pat; int64_t pat_len, pat_cap;
	char *scr; int64_t scr_cap;
	uintptr_t handle;
	int64_t side_off, side_len; int32_t logroom;
} sl_batch;
typedef struct sl_api {
	int (*grow_out)(sl_batch *, int64_t);
	int (*grow_pat)(sl_batch *, int64_t);
	int (*grow_scr)(sl_batch *, int64_t);
	int64_t (*escape)(char *, const char *, int64_t);
	int (*fmtnum)(char *, double);
	int32_t (*column)(sl_batch *, const char *, size_t);
	int32_t (*columns)(sl_batch *);
	int (*poll)(sl_batch *, const uint64_t *, double);
} sl_api;
typedef struct __attribute__((packed)) sl_patch {
	int32_t row; int32_t klen; int32_t vlen; uint8_t tag; double num;
} sl_patch;
]]

-- Diagnostics: SLUICE_LUAJIT_TRACE=file logs trace aborts (jit.v),
if os.getenv("SLUICE_LUAJIT_TRACE") then require("jit.v").start(os.getenv("SLUICE_LUAJIT_TRACE")) end
local B = ffi_cast("sl_batch*", baddr)
local api = ffi_cast("sl_api*", apiaddr)
local grow_out, grow_pat, grow_scr = api.grow_out, api.grow_pat, api.grow_scr
local escape, fmtnum, column, columns, poll = api.escape, api.fmtnum, api.column, api.columns, api.poll
local stopp = ffi_cast("volatile int32_t*", ffi_cast("char*", B) + ffi.offsetof("sl_batch", "stop"))
local patch_t = ffi.typeof("sl_patch*")
local PATCH = ffi.sizeof("sl_patch")

local allow = {}
for name in (allowlist or ""):gmatch("[^,]+") do allow[name] = true end

-- Cell tags (the Go side writes them; keep in sync with engine.go).
local T_ABSENT, T_NULL, T_STR, T_STRESC, T_NUM, T_TRUE, T_FALSE, T_JSON, T_RAW, T_TIME = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9
-- Result tags, per row.
local R_NIL, R_STR, R_NUM, R_TRUE, R_FALSE, R_JSON, R_ROW, R_ERR, R_TIMEOUT, R_MEM, R_CANCEL = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
-- Patch tags, per field a script wrote.
local P_DEL, P_NULL, P_STR, P_NUM, P_TRUE, P_FALSE, P_JSON = 0, 1, 2, 3, 4, 5, 6

-- The host's own stops travel as these error values; the sandbox's pcall and
-- xpcall pass them on, so user code cannot swallow a timeout.
local INTERRUPT, MEMSTOP, CANCEL = {}, {}, {}
local stopping = nil

local cur = 0     -- the row running (0-based)
local nrows = 0   -- rows in the batch
local budget = 0  -- checks until the next memory check

local function stop(e)
  stopping = e
  error(e, 0)
end

local function interrupted()
  local s = stopp[0]
  if s == -1 then stop(CANCEL) end
  if s == cur + 1 then stop(INTERRUPT) end
  stopp[0] = 0 -- meant for a row that has ended
end

local function memcheck()
  if collectgarbage("count") > memlimit_kb then
    collectgarbage("collect")
    if collectgarbage("count") > memlimit_kb then stop(MEMSTOP) end
  end
end

-- check is called by the code the rewriter adds at every loop iteration,
-- function entry and label of user code. In a compiled trace it is one
-- direct call of a C function (sl_poll, host.c) and a guard: when the
-- watchdog writes the stop word the guard fails, the trace exits and the
-- interpreter raises. (A load of the stop word written here in Lua would
-- be hoisted out of the loop by the JIT and never read again.) Memory:
-- when the VM's byte count could be located (sl_gctotal_addr) the same
-- call compares it with the limit; else collectgarbage every 1024th time.
local check
local limit_bytes = memlimit_kb * 1024
if gctotal_addr ~= 0 then
  local total = ffi_cast("const uint64_t*", gctotal_addr)
  check = function()
    local r = poll(B, total, limit_bytes)
    if r ~= 0 then
      if r == 1 then interrupted() else memcheck() end
    end
  end
else
  check = function()
    if poll(B, nil, 0) ~= 0 then interrupted() end
    budget = budget + 1
    if budget >= 1024 then
      budget = 0
      memcheck()
    end
  end
end

local NULL = setmetatable({}, {
  __tostring = function() return "null" end,
  __newindex = function() error("json.null is read-only", 2) end,
  __metatable = false,
})
local DELETED = {}

------------------------------------------------------------------------
-- The row object: an empty table whose metatable reads cells of the batch.

local colOf = {}   -- key -> column, this batch
local colName = {} -- column -> key, this batch
local colKey = {}  -- column -> the key as JSON with the colon, this batch
local writes = {}  -- key -> value (DELETED for nil) written by the current row
local wdirty = false

local decode -- forward
local row = {}

local function addcol(k)
  local c = column(B, k, #k)
  if c < 0 then error("sluice: cannot lay out column " .. k, 3) end
  colOf[k] = c
  return c
end

local function cell(c, i)
  local j = c * nrows + i
  local t = B.tag[j]
  if t == T_STR or t == T_STRESC or t == T_RAW then
    return ffi_string(B.arena + B.off[j], B.len[j])
  elseif t == T_NUM or t == T_TIME then
    return B.num[j]
  elseif t == T_TRUE then
    return true
  elseif t == T_FALSE then
    return false
  elseif t == T_JSON then
    return decode(ffi_string(B.arena + B.off[j], B.len[j]))
  end
  return nil
end

local function rowget(k)
  if wdirty then
    local w = writes[k]
    if w ~= nil then
      if w == DELETED then return nil end
      return w
    end
  end
  if type(k) ~= "string" then return nil end
  local c = colOf[k]
  if c == nil then c = addcol(k) end
  return cell(c, cur)
end

local function rowset(_, k, v)
  if type(k) ~= "string" then error("row keys are strings, not " .. type(k), 2) end
  local t = type(v)
  if v == nil then
    v = DELETED
  elseif v == row then
    error("a row cannot be stored in itself", 2)
  elseif t ~= "string" and t ~= "number" and t ~= "boolean" and t ~= "table" then
    error("a " .. t .. " cannot be stored in a row", 2)
  end
  writes[k] = v
  wdirty = true
end

-- __index is rowget written out in one function: the JIT records a
-- metamethod call per field read, and nested helper calls in it made the
-- recorder give up ("loop unroll limit reached") on scripts reading
-- several fields.
local function rowindex(_, k)
  if wdirty then
    local w = writes[k]
    if w ~= nil then
      if w == DELETED then return nil end
      return w
    end
  end
  local c = colOf[k]
  if c == nil then
    if type(k) ~= "string" then return nil end
    c = addcol(k)
  end
  local j = c * nrows + cur
  local t = B.tag[j]
  if t == T_STR or t == T_STRESC or t == T_RAW then
    return ffi_string(B.arena + B.off[j], B.len[j])
  elseif t == T_NUM or t == T_TIME then
    return B.num[j]
  elseif t == T_TRUE then
    return true
  elseif t == T_FALSE then
    return false
  elseif t == T_JSON then
    return decode(ffi_string(B.arena + B.off[j], B.len[j]))
  end
  return nil
end

setmetatable(row, {
  __index = rowindex,
  __newindex = rowset,
  __metatable = false,
  __tostring = function() return "row" end,
})

-- allcols lays out every column of the batch (one call into Go per batch)
-- and names them.
local function allcols()
  if B.all == 0 then
    if columns(B) < 0 then error("sluice: cannot lay out the row", 3) end
  end
  for c = 0, B.ncols - 1 do
    if colName[c] == nil then
      local name = ffi_string(B.arena + B.name_off[c], B.name_len[c])
      colName[c] = name
      colOf[name] = c
    end
  end
end

local function present(c, k)
  if wdirty then
    local w = writes[k]
    if w ~= nil then return w ~= DELETED end
  end
  return B.tag[c * nrows + cur] ~= T_ABSENT
end

-- rowkeys: the keys the row has now, sorted.
local function rowkeys()
  allcols()
  local keys, n, extra = tnew(B.ncols + 1, 0), 0, false
  for p = 0, B.ncols - 1 do
    local c = B.order[p]
    local k = colName[c]
    if present(c, k) then
      n = n + 1
      keys[n] = k
    end
  end
  if wdirty then
    for k, v in next, writes do
      if v ~= DELETED and colOf[k] == nil then
        n = n + 1
        keys[n] = k
        extra = true
      end
    end
    if extra then tsort(keys) end
  end
  return keys, n
end

-- rownext iterates the keys rowkeys gave; the position is kept in the
-- keys table itself (keys[0]), so no closure is made per pairs(row) (the
-- JIT cannot compile closure creation).
local function rownext(keys)
  local p = keys[0] + 1
  local k = keys[p]
  if k == nil then return nil end
  keys[0] = p
  local v = rowget(k)
  if v == nil then v = NULL end
  return k, v
end

local function rowpairs()
  local keys = rowkeys()
  keys[0] = 0
  return rownext, keys, nil
end

------------------------------------------------------------------------
-- JSON: the encoder writes into the batch's scratch buffer with C helpers
-- called over FFI (string escaping, Go-compatible number formatting), and
-- copies cells of the row straight from the arena (numbers, maps and
-- arrays are already JSON text there).

local wp, wlen, wcap = nil, 0, 0

local function wreserve(n)
  if wlen + n > wcap then
    if grow_scr(B, wlen + n) == 0 then stop(MEMSTOP) end
    wp, wcap = B.scr, B.scr_cap
  end
end

local function wraw(s)
  local n = #s
  wreserve(n)
  ffi_copy(wp + wlen, s, n)
  wlen = wlen + n
end

local function wbytes(p, n)
  wreserve(n)
  ffi_copy(wp + wlen, p, n)
  wlen = wlen + n
end

local function wstr(s)
  local n = #s
  wreserve(6 * n + 2)
  wlen = wlen + escape(wp + wlen, s, n)
end

local function wnum(x)
  wreserve(32)
  local n = fmtnum(wp + wlen, x)
  if n < 0 then error("json.encode: " .. tostring(x) .. " is not a JSON number", 0) end
  wlen = wlen + n
end

local wvalue -- forward

local function wcell(c)
  local j = c * nrows + cur
  local t = B.tag[j]
  if t == T_STR then
    wreserve(B.len[j] + 2)
    wp[wlen] = 34
    ffi_copy(wp + wlen + 1, B.arena + B.off[j], B.len[j])
    wlen = wlen + B.len[j] + 1
    wp[wlen] = 34
    wlen = wlen + 1
  elseif t == T_STRESC then
    local n = B.len[j]
    wreserve(6 * n + 2)
    wlen = wlen + escape(wp + wlen, B.arena + B.off[j], n)
  elseif t == T_TRUE then
    wraw("true")
  elseif t == T_FALSE then
    wraw("false")
  elseif t == T_NULL then
    wraw("null")
  else -- T_NUM, T_TIME, T_JSON, T_RAW: the arena holds the JSON text,
    -- but for a number laid out without it (len -1: noText in vm.go)
    local n = B.len[j]
    if n < 0 then
      wnum(B.num[j])
    else
      wbytes(B.arena + B.off[j], n)
    end
  end
end

local function colkey(c)
  local s = colKey[c]
  if s == nil then
    local save = wlen
    wstr(colName[c])
    wraw(":")
    s = ffi_string(wp + save, wlen - save)
    wlen = save
    colKey[c] = s
  end
  return s
end

local function wrow(omit)
  allcols()
  if wdirty then
    for k, v in next, writes do
      if v ~= DELETED and colOf[k] == nil then
        -- keys the script added: the slow path, in sorted order
        local keys, n = rowkeys()
        wraw("{")
        local first = true
        for i = 1, n do
          local key = keys[i]
          if not (omit and omit[key]) then
            if not first then wraw(",") end
            first = false
            wstr(key)
            wraw(":")
            local val = rowget(key)
            if val == nil then wraw("null") else wvalue(val, 1) end
          end
        end
        wraw("}")
        return
      end
    end
  end
  wraw("{")
  local first = true
  for p = 0, B.ncols - 1 do
    local c = B.order[p]
    local k = colName[c]
    if not (omit and omit[k]) then
      local w = nil
      if wdirty then w = writes[k] end
      if w ~= nil then
        if w ~= DELETED then
          if not first then wraw(",") end
          first = false
          wraw(colkey(c))
          wvalue(w, 1)
        end
      elseif B.tag[c * nrows + cur] ~= T_ABSENT then
        if not first then wraw(",") end
        first = false
        wraw(colkey(c))
        wcell(c)
      end
    end
  end
  wraw("}")
end

local function tablekeys(t, omit)
  local keys, n = {}, 0
  for k in next, t do
    local tk = type(k)
    if tk == "number" then
      k = (k == floor(k) and k > -1e15 and k < 1e15) and ("%d"):format(k) or tostring(k)
    elseif tk ~= "string" then
      error("json.encode: a " .. tk .. " key cannot be a JSON key", 0)
    end
    if not (omit and omit[k]) then
      n = n + 1
      keys[n] = k
    end
  end
  tsort(keys)
  return keys, n
end

local function wtable(t, depth, omit)
  if depth > 100 then error("json.encode: tables nested deeper than 100 (cyclic?)", 0) end
  local n, count, isarr = 0, 0, true
  for k in next, t do
    count = count + 1
    if isarr and type(k) == "number" and k >= 1 and k == floor(k) then
      if k > n then n = k end
    else
      isarr = false
    end
  end
  if isarr and count == n and n > 0 and not omit then
    wraw("[")
    for i = 1, n do
      if i > 1 then wraw(",") end
      wvalue(t[i], depth + 1)
    end
    wraw("]")
    return
  end
  local keys, m = tablekeys(t, omit)
  wraw("{")
  for i = 1, m do
    if i > 1 then wraw(",") end
    local k = keys[i]
    wstr(k)
    wraw(":")
    local v = rawget(t, k)
    if v == nil then v = rawget(t, tonumber(k)) end
    wvalue(v, depth + 1)
  end
  wraw("}")
end

wvalue = function(v, depth)
  local t = type(v)
  if t == "string" then
    wstr(v)
  elseif t == "number" then
    wnum(v)
  elseif t == "boolean" then
    wraw(v and "true" or "false")
  elseif v == nil or v == NULL then
    wraw("null")
  elseif v == row then
    wrow(nil)
  elseif t == "table" then
    wtable(v, depth, nil)
  else
    error("json.encode: a " .. t .. " cannot be encoded", 0)
  end
end

local function encode_lua(v)
  wp, wcap, wlen = B.scr, B.scr_cap, 0
  wvalue(v, 0)
  return ffi_string(wp, wlen)
end

-- Tables go to the encoder in C (host.c): measured against this file's
-- encoder compiled by the JIT, it wins on tables (sorting keys and the
-- nested calls of a recursive encoder are where traces break), while the
-- row itself is fastest here, copying its cells' JSON from the arena.
local encode_c = make_encoder(NULL, row, function() return encode_lua(row) end)

local function encode(v)
  if v == row or type(v) ~= "table" then return encode_lua(v) end
  return encode_c(v)
end

local function encode_omitting(v, omitlist)
  local omit = nil
  if type(omitlist) == "table" then
    omit = {}
    for i = 1, #omitlist do omit[omitlist[i]] = true end
  end
  wp, wcap, wlen = B.scr, B.scr_cap, 0
  if v == row then
    wrow(omit)
  elseif type(v) == "table" and v ~= NULL then
    wtable(v, 0, omit)
  else
    wvalue(v, 0)
  end
  return ffi_string(wp, wlen)
end

-- The decoder is in C (host.c): measured, a decoder in Lua compiled by the
-- JIT took ~5x the time of lua-cjson on a 20-field object; this one is on
-- par with lua-cjson. Nulls inside objects and arrays are json.null.
decode = make_decoder(NULL)

------------------------------------------------------------------------
-- The sandbox.

-- sealed names the read-only proxies, for the functions that write past
-- __newindex (rawset, table.insert/remove/sort): an empty proxy written raw
-- would keep what one call put in it for every later call.
local sealed = setmetatable({}, { __mode = "k" })

local function readonly(src, name, drop)
  local copy = {}
  for k, v in next, src do
    if not (drop and drop[k]) then copy[k] = v end
  end
  local proxy = setmetatable({}, {
    __index = copy,
    __newindex = function() error(name .. " is read-only", 2) end,
    __metatable = false,
  })
  sealed[proxy] = name
  return proxy, copy
end

-- refuse_sealed wraps a function writing raw to its first argument.
local function refuse_sealed(fn)
  return function(t, ...)
    local name = sealed[t]
    if name then error(name .. " is read-only", 2) end
    return fn(t, ...)
  end
end

local base = {}
for _, k in ipairs({ "assert", "error", "ipairs", "next", "rawequal", "rawget", "rawset", "select",
  "tonumber", "tostring", "type", "unpack", "setmetatable", "getmetatable", "print" }) do
  base[k] = G[k]
end
base._VERSION = _VERSION

-- OOM is LuaJIT's message when an allocation fails: host.c's allocator
-- refuses any growth past the VM's hard limit (twice memlimit), e.g. inside
-- a builtin building a huge string. User code cannot swallow it.
local OOM = "not enough memory"
local function rethrow(ok, ...)
  if not ok and (stopping or (...) == OOM) then error(stopping or MEMSTOP, 0) end
  return ok, ...
end
base.pcall = function(f, ...) return rethrow(pcall(f, ...)) end
base.xpcall = function(f, h, ...) return rethrow(xpcall(f, h, ...)) end
base.pairs = function(t)
  if t == row then return rowpairs() end
  return next, t, nil
end
base.collectgarbage = function(opt, arg)
  if opt == nil or opt == "collect" or opt == "count" or opt == "step" then
    return collectgarbage(opt, arg)
  end
  error("collectgarbage: option " .. tostring(opt) .. " is not allowed", 2)
end

local memlimit_bytes = memlimit_kb * 1024
local srep = string.rep
local string_ro, string_copy = readonly(string, "string", { dump = true })
string_copy.rep = function(s, n, sep)
  local total = #tostring(s) * (tonumber(n) or 0) + (sep and #tostring(sep) * (tonumber(n) or 0) or 0)
  if total > memlimit_bytes then
    error(("string.rep: a result of %d bytes is over the memory limit of %d bytes"):format(total, memlimit_bytes), 2)
  end
  return srep(s, n, sep)
end
-- The pattern functions are host.c's: LuaJIT's run a backtracking matcher
-- to its end, out of reach of the checks in user code, so one pathological
-- pattern held the VM for ever; these call check every few thousand steps.
local pfind
pfind, string_copy.match, string_copy.gmatch, string_copy.gsub = make_patterns(check)
-- A plain find cannot backtrack: LuaJIT's own, which the JIT compiles.
string_copy.find = function(s, p, init, plain)
  if plain then return sfind(s, p, init, plain) end
  return pfind(s, p, init, plain)
end
base.string = string_ro
base.rawset = refuse_sealed(rawset)
-- table.concat builds its result in one call, out of reach of the checks:
-- its size is checked first (3,000 references to a 1 MB string took a VM
-- to 2.17 GB), as string.rep's is.
local tconcat = table.concat
local table_ro, table_copy = readonly(table, "table")
for _, k in ipairs({ "insert", "remove", "sort" }) do table_copy[k] = refuse_sealed(table[k]) end
table_copy.concat = function(t, sep, i, j)
  if type(t) == "table" then
    local first, last = tonumber(i) or 1, tonumber(j) or #t
    local seplen = type(sep) == "string" and #sep or (type(sep) == "number" and #tostring(sep) or 0)
    local total = 0
    for k = first, last do
      local v = rawget(t, k)
      if type(v) == "string" then total = total + #v + seplen
      elseif type(v) == "number" then total = total + 24 + seplen end
      if total > memlimit_bytes then
        error(("table.concat: a result of more than %d bytes is over the memory limit of %d bytes"):format(total, memlimit_bytes), 2)
      end
    end
  end
  return tconcat(t, sep, i, j)
end
base.table = table_ro
base.math = readonly(math, "math")
-- Methods on strings ("x"):upper() see the same read-only string table; the
-- string metatable itself is hidden.
local smeta = getmetatable("")
smeta.__index = string_ro
smeta.__metatable = false

local genv = {} -- the globals every user function sees
local gdirty = false
setmetatable(genv, {
  __index = base,
  __newindex = function(t, k, v)
    gdirty = true
    rawset(t, k, v)
  end,
  __metatable = false,
})
base._G = genv

if allow.coroutine then base.coroutine = readonly(coroutine, "coroutine") end
if allow.io then base.io = io end
if allow.os then base.os = os end
if allow.debug then base.debug = debug end
if allow.load then
  -- text only: a binary chunk can break out of any sandbox
  local function textload(s, name)
    if type(s) ~= "string" then return nil, "load: only strings are allowed" end
    if sbyte(s, 1) == 27 then return nil, "load: binary chunks are not allowed" end
    local f, err = loadstring(s, name)
    if f then setfenv(f, genv) end
    return f, err
  end
  base.load = textload
  base.loadstring = textload
end

local json = readonly({ encode = encode, decode = decode, null = NULL }, "json")

local sluice_config -- forward: the host modules' section
local function sluice_delete(t, keys)
  if type(keys) ~= "table" then error("sluice.delete: keys must be an array", 2) end
  if t == row then
    for i = 1, #keys do
      local k = keys[i]
      if type(k) == "string" then
        writes[k] = DELETED
        wdirty = true
      end
    end
  elseif type(t) == "table" then
    for i = 1, #keys do t[keys[i]] = nil end
  else
    error("sluice.delete: row or table expected", 2)
  end
end
local sluice = readonly({ encode = encode_omitting, delete = sluice_delete, config = function(key) return sluice_config(key) end }, "sluice")

------------------------------------------------------------------------
-- The host modules log and stats (luavm/hostmod.go has gopher-lua's): their
-- calls are kept in this VM's tables and handed to the Go side once per
-- batch (flushside), so a call crosses no cgo boundary. The Go side gives
-- each batch its share of the script's log rate limit (B.logroom) before
-- the batch; the lines beyond it are only counted.

local logq, logn, logdropped = {}, 0, 0
-- per kind: series key -> sum (c), last value (g), values (h); and the
-- calls per key of c and g, which the series cap counts when it drops them
local acc = { c = {}, g = {}, h = {}, cn = {}, gn = {} }
local accany = false

local function logfn(level)
  local fname = "log." .. level
  return function(msg, fields)
    local tm = type(msg)
    if tm ~= "string" and tm ~= "number" then
      error(("bad argument #1 to '%s' (string expected, got %s)"):format(fname, tm), 2)
    end
    if fields ~= nil and type(fields) ~= "table" then
      error(("bad argument #2 to '%s' (fields must be a table)"):format(fname), 2)
    end
    if logn >= B.logroom then
      logdropped = logdropped + 1
      return
    end
    local info = getinfo(2, "l")
    logn = logn + 1
    logq[logn] = { level, tostring(msg), cur, info and info.currentline or 0, fields and encode(fields) or false }
  end
end
local log = readonly({ debug = logfn("debug"), info = logfn("info"), warn = logfn("warn"), error = logfn("error") }, "log")

local goodname = {} -- metric and label names already checked
local reserved = { table = true, column = true, name = true, le = true }
local function checkname(fname, name, what)
  if goodname[name] then return end
  if type(name) ~= "string" or not sfind(name, "^[%a_][%w_]*$") or (what == "label" and (reserved[name] or sfind(name, "^__"))) then
    error(("%s: bad metric: %s name %s (want letters, digits and _, not starting with a digit; labels not table, column, name, le)"):format(fname, what, tostring(name)), 3)
  end
  goodname[name] = true
end

local function labelkey(fname, labels)
  local ks = {}
  for k, v in next, labels do
    checkname(fname, k, "label")
    local tv = type(v)
    if tv ~= "string" and tv ~= "number" and tv ~= "boolean" then
      error(fname .. ": label values must be strings, numbers or booleans", 3)
    end
    ks[#ks + 1] = k
  end
  tsort(ks)
  for i = 1, #ks do ks[i] = ks[i] .. "=" .. tostring(labels[ks[i]]) end
  return tconcat_host(ks, "\0")
end

local function statfn(kind, fname)
  return function(name, v, labels)
    checkname(fname, name, "metric")
    if type(v) ~= "number" then
      if kind == "c" and v == nil then v = 1
      elseif kind == "c" and type(v) == "table" and labels == nil then labels, v = v, 1
      else error(("bad argument #2 to '%s' (number expected, got %s)"):format(fname, type(v)), 2) end
    end
    local key = name
    if labels ~= nil then
      if type(labels) ~= "table" then error(("bad argument #3 to '%s' (labels must be a table)"):format(fname), 2) end
      if next(labels) ~= nil then key = name .. "\0" .. labelkey(fname, labels) end
    end
    local t = acc[kind]
    if kind == "c" then
      t[key] = (t[key] or 0) + v
      local cn = acc.cn
      cn[key] = (cn[key] or 0) + 1
    elseif kind == "g" then
      t[key] = v
      local gn = acc.gn
      gn[key] = (gn[key] or 0) + 1
    else
      local l = t[key]
      if l == nil then l = {}; t[key] = l end
      l[#l + 1] = v
    end
    accany = true
  end
end
local stats = readonly({ inc = statfn("c", "stats.inc"), set = statfn("g", "stats.set"), observe = statfn("h", "stats.observe") }, "stats")

-- flushside writes the batch's log lines and stats to the output as one
-- JSON document the Go side reads after the batch (B.side_off, side_len).
local put_out -- forward: defined with what the Go side calls
local function flushside()
  B.side_len = 0
  if logn == 0 and logdropped == 0 and not accany then return end
  local doc = { dropped = logdropped }
  if logn > 0 then doc.logs = logq end
  for k, t in next, acc do
    if next(t) ~= nil then doc[k] = t end
  end
  local js = encode(doc)
  local off, n = put_out(js)
  B.side_off, B.side_len = off, n
  tclear(logq)
  logn, logdropped, accany = 0, 0, false
  for _, t in next, acc do tclear(t) end
end

local params = paramsjson and paramsjson ~= "" and decode(paramsjson) or {}
sluice_config = function(key)
  local v = params[key]
  if v == NULL then return nil end
  return v
end

base.require = function(name)
  if name == "json" then return json end
  if name == "sluice" then return sluice end
  if name == "log" then return log end
  if name == "stats" then return stats end
  if name == "ffi" and allow.ffi then return ffi end
  if allow.require then return real_require(name) end
  error(("module %q not found (file modules are not allowed for this script; Allow \"require\")"):format(tostring(name)), 2)
end

------------------------------------------------------------------------
-- What the Go side calls.

local function handler(e)
  if e == INTERRUPT or e == MEMSTOP or e == CANCEL then return e end
  if e == OOM then return MEMSTOP end
  local msg = tostring(e)
  -- no room for a traceback when the stack is what overflowed
  if sfind(msg, "stack overflow", 1, true) then return msg end
  return traceback(msg, 1)
end

local function clearglobals()
  tclear(genv)
  gdirty = false
end

-- init runs a script's main chunk once per VM; what it defines becomes part
-- of base, the state every call starts from.
local function init(chunk, fname)
  setfenv(chunk, genv)
  cur, stopping = 0, nil
  local ok, err = xpcall(chunk, handler, check)
  if not ok then
    if err == INTERRUPT then return "timeout" end
    if err == MEMSTOP or err == OOM then return "memory" end
    return err
  end
  for k, v in next, genv do base[k] = v end
  clearglobals()
  if type(rawget(base, fname)) ~= "function" then return "nofunc" end
  return nil
end

-- toolarge fails a row whose value (a result, or a field it wrote) is over
-- max_result_bytes, before it is copied out.
local function toolarge(n, what)
  error(("%s of %d bytes is over the result size limit of %d bytes (max_result_bytes)"):format(what, n, maxresult), 0)
end

put_out = function(s)
  local n = #s
  local off = B.out_len
  if off + n > B.out_cap then
    if grow_out(B, off + n) == 0 then stop(MEMSTOP) end
  end
  ffi_copy(B.out + off, s, n)
  B.out_len = off + n
  return off, n
end

local function result(i, v)
  local t = type(v)
  if t == "string" then
    if #v > maxresult then toolarge(#v, "the string returned") end
    local off, n = put_out(v)
    B.rtag[i], B.roff[i], B.rlen[i] = R_STR, off, n
  elseif t == "number" then
    B.rtag[i], B.rnum[i] = R_NUM, v
  elseif t == "boolean" then
    B.rtag[i] = v and R_TRUE or R_FALSE
  elseif v == nil or v == NULL then
    B.rtag[i] = R_NIL
  elseif v == row then
    B.rtag[i] = R_ROW
  elseif t == "table" then
    local js = encode(v)
    if #js > maxresult then toolarge(#js, "the table returned (as JSON)") end
    local off, n = put_out(js)
    B.rtag[i], B.roff[i], B.rlen[i] = R_JSON, off, n
  else
    error("a " .. t .. " cannot be a column value", 0)
  end
end

local function patch(i, k, tag, num, s)
  local kl, vl = #k, s and #s or 0
  if vl > maxresult then toolarge(vl, "the value written to row." .. k) end
  local off = B.pat_len
  local need = off + PATCH + kl + vl
  if need > B.pat_cap then
    if grow_pat(B, need) == 0 then stop(MEMSTOP) end
  end
  local p = ffi_cast(patch_t, B.pat + off)
  p.row, p.klen, p.vlen, p.tag, p.num = i, kl, vl, tag, num
  ffi_copy(B.pat + off + PATCH, k, kl)
  if vl > 0 then ffi_copy(B.pat + off + PATCH + kl, s, vl) end
  B.pat_len = need
end

local function flush(i)
  for k, v in next, writes do
    local t = type(v)
    if v == DELETED then
      patch(i, k, P_DEL, 0, nil)
    elseif v == NULL then
      patch(i, k, P_NULL, 0, nil)
    elseif t == "string" then
      patch(i, k, P_STR, 0, v)
    elseif t == "number" then
      patch(i, k, P_NUM, v, nil)
    elseif t == "boolean" then
      patch(i, k, v and P_TRUE or P_FALSE, 0, nil)
    else
      patch(i, k, P_JSON, 0, encode(v))
    end
  end
end

local function callrow(fn)
  local v = fn(row)
  result(cur, v)
  if wdirty then flush(cur) end
end

-- run calls base[fname] on every row of the batch B describes.
local function run(fname, n)
  local fn = rawget(base, fname)
  nrows = n
  tclear(colOf)
  tclear(colName)
  tclear(colKey)
  B.out_len, B.pat_len = 0, 0
  for i = 0, n - 1 do
    cur = i
    B.cur = i
    stopping = nil
    local pl = B.pat_len
    local ok, err = xpcall(callrow, handler, fn)
    if not ok then B.pat_len = pl end
    local s = stopp[0]
    if s == -1 or err == CANCEL then
      B.rtag[i] = R_CANCEL
      B.done = i
      if wdirty then tclear(writes); wdirty = false end
      if gdirty or next(genv) ~= nil then clearglobals() end
      flushside()
      return
    end
    if s == i + 1 or err == INTERRUPT then
      B.rtag[i] = R_TIMEOUT
      B.pat_len = pl
      stopp[0] = 0
    elseif not ok then
      -- LuaJIT calls no handler for a memory error: xpcall gives OOM itself
      if err == MEMSTOP or err == OOM then
        B.rtag[i] = R_MEM
      else
        local off, len = put_out(tostring(err))
        B.rtag[i], B.roff[i], B.rlen[i] = R_ERR, off, len
      end
    end
    if wdirty then
      tclear(writes)
      wdirty = false
    end
    if gdirty or next(genv) ~= nil then clearglobals() end
  end
  B.done = n
  flushside()
end

return { init = init, run = run }
