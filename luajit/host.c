//go:build luajit

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <math.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "host.h"
#include "_cgo_export.h"

static int grow(char **p, int64_t *cap, int64_t need) {
	if (need <= *cap) return 1;
	int64_t n = *cap ? *cap : 4096;
	while (n < need) n *= 2;
	char *q = realloc(*p, (size_t)n);
	if (!q) return 0;
	*p = q;
	*cap = n;
	return 1;
}

int sl_grow_out(sl_batch *b, int64_t need) { return grow(&b->out, &b->out_cap, need); }
int sl_grow_pat(sl_batch *b, int64_t need) { return grow(&b->pat, &b->pat_cap, need); }
int sl_grow_scr(sl_batch *b, int64_t need) { return grow(&b->scr, &b->scr_cap, need); }

void sl_free(void *p) { free(p); }
void *sl_realloc(void *p, size_t n) { return realloc(p, n); }

static const char hexd[] = "0123456789abcdef";

/* sl_escape writes s as a JSON string, quotes included, the bytes
 * encoding/json writes with HTML escaping off (internal/jsonw.AppendString):
 * invalid UTF-8 becomes \ufffd, U+2028/2029 are escaped. dst needs 6n+2 bytes. */
int64_t sl_escape(char *dst, const char *src, int64_t n) {
	const unsigned char *s = (const unsigned char *)src;
	char *d = dst;
	*d++ = '"';
	int64_t i = 0;
	while (i < n) {
		unsigned char c = s[i];
		if (c < 0x80) {
			if (c >= 0x20 && c != '"' && c != '\\') { *d++ = (char)c; i++; continue; }
			*d++ = '\\';
			switch (c) {
			case '"': case '\\': *d++ = (char)c; break;
			case '\n': *d++ = 'n'; break;
			case '\r': *d++ = 'r'; break;
			case '\t': *d++ = 't'; break;
			case '\b': *d++ = 'b'; break;
			case '\f': *d++ = 'f'; break;
			default: *d++ = 'u'; *d++ = '0'; *d++ = '0'; *d++ = hexd[c >> 4]; *d++ = hexd[c & 15];
			}
			i++;
			continue;
		}
		/* a UTF-8 sequence: copy it when valid, else \ufffd for one byte */
		int size = 0;
		uint32_t r = 0;
		if (c >= 0xC2 && c <= 0xDF) { size = 2; r = c & 0x1F; }
		else if (c >= 0xE0 && c <= 0xEF) { size = 3; r = c & 0x0F; }
		else if (c >= 0xF0 && c <= 0xF4) { size = 4; r = c & 0x07; }
		int ok = size > 0 && i + size <= n;
		for (int k = 1; ok && k < size; k++) {
			if ((s[i + k] & 0xC0) != 0x80) ok = 0;
			else r = (r << 6) | (s[i + k] & 0x3F);
		}
		if (ok) {
			if ((size == 3 && (r < 0x800 || (r >= 0xD800 && r <= 0xDFFF))) || (size == 4 && (r < 0x10000 || r > 0x10FFFF))) ok = 0;
		}
		if (!ok) {
			memcpy(d, "\\ufffd", 6);
			d += 6;
			i++;
			continue;
		}
		if (r == 0x2028 || r == 0x2029) {
			memcpy(d, "\\u202", 5);
			d += 5;
			*d++ = hexd[r & 15];
		} else {
			memcpy(d, s + i, (size_t)size);
			d += size;
		}
		i += size;
	}
	*d++ = '"';
	return d - dst;
}

/* sl_fmtnum writes x as encoding/json formats a float64 (shortest digits that
 * read back as x; the e form below 1e-6 and from 1e21; no leading zero in a
 * negative exponent). Returns the length, or -1 for NaN and infinities. dst
 * needs 32 bytes. */
int sl_fmtnum(char *dst, double x) {
	if (isnan(x) || isinf(x)) return -1;
	if (x == 0) {
		if (signbit(x)) { memcpy(dst, "-0", 2); return 2; }
		dst[0] = '0';
		return 1;
	}
	if (x == floor(x) && fabs(x) < 9007199254740992.0) {
		return snprintf(dst, 32, "%lld", (long long)x);
	}
	char buf[40];
	int p;
	for (p = 1; p <= 17; p++) {
		snprintf(buf, sizeof buf, "%.*e", p - 1, x);
		if (strtod(buf, NULL) == x) break;
	}
	/* buf is [-]d[.ddd]e[+-]XX: take the digits and the exponent apart */
	char digits[20];
	int nd = 0, neg = 0;
	const char *q = buf;
	if (*q == '-') { neg = 1; q++; }
	while (*q && *q != 'e') {
		if (*q != '.') digits[nd++] = *q;
		q++;
	}
	int exp10 = atoi(q + 1); /* x = d.ddd * 10^exp10 */
	while (nd > 1 && digits[nd - 1] == '0') nd--;
	char *d = dst;
	if (neg) *d++ = '-';
	double ax = fabs(x);
	if (ax < 1e-6 || ax >= 1e21) {
		*d++ = digits[0];
		if (nd > 1) {
			*d++ = '.';
			memcpy(d, digits + 1, (size_t)(nd - 1));
			d += nd - 1;
		}
		*d++ = 'e';
		*d++ = exp10 < 0 ? '-' : '+';
		int e = exp10 < 0 ? -exp10 : exp10;
		if (e >= 100) { *d++ = (char)('0' + e / 100); e %= 100; *d++ = (char)('0' + e / 10); *d++ = (char)('0' + e % 10); }
		else if (e >= 10 || exp10 > 0) { *d++ = (char)('0' + e / 10); *d++ = (char)('0' + e % 10); }
		else *d++ = (char)('0' + e); /* e-7, not e-07 */
		return (int)(d - dst);
	}
	if (exp10 < 0) {
		*d++ = '0';
		*d++ = '.';
		for (int k = -1; k > exp10; k--) *d++ = '0';
		memcpy(d, digits, (size_t)nd);
		d += nd;
	} else {
		for (int k = 0; k <= exp10 || k < nd; k++) {
			if (k == exp10 + 1) *d++ = '.';
			*d++ = k < nd ? digits[k] : '0';
		}
	}
	return (int)(d - dst);
}

int32_t sl_column(sl_batch *b, const char *k, size_t n) { return slColumn(b->handle, (char *)k, n); }
int32_t sl_columns(sl_batch *b) { return slColumns(b->handle); }

/* The VM's allocator: LuaJIT's own, with a count of the bytes it holds and a
 * hard limit. The checks compiled into user code stop a script whose heap
 * went over the VM's memory limit, but they run between calls: a builtin
 * (table.concat of 3,000 references to a 1 MB string, string.rep, gsub)
 * builds its result in one call, and reached 2.17 GB against a 256 MiB
 * limit. Here a growth that would take the VM past the hard limit (twice
 * the memory limit: room for garbage the collector has not reached yet)
 * fails, and LuaJIT raises "not enough memory", which the host turns into
 * the row's memory error. Frees and shrinks always succeed. */
typedef struct {
	lua_Alloc f;
	void *ud;
	size_t total, hard;
} sl_allocstate;

static void *sl_alloc(void *ud, void *p, size_t osize, size_t nsize) {
	sl_allocstate *a = ud;
	if (nsize > osize && a->hard > 0 && a->total + (nsize - osize) > a->hard) return NULL;
	void *q = a->f(a->ud, p, osize, nsize);
	if (q != NULL || nsize == 0) a->total = a->total - (p ? osize : 0) + nsize;
	return q;
}

lua_State *sl_newstate(void) {
	lua_State *L = luaL_newstate();
	if (!L) return NULL;
	sl_allocstate *a = calloc(1, sizeof *a);
	if (!a) {
		lua_close(L);
		return NULL;
	}
	a->f = lua_getallocf(L, &a->ud);
	a->total = (size_t)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB, 0);
	lua_setallocf(L, sl_alloc, a);
	luaL_openlibs(L);
	return L;
}

/* sl_sethardlimit sets the bytes the VM's heap may never pass (0: none). */
void sl_sethardlimit(lua_State *L, size_t hard) {
	void *ud;
	if (lua_getallocf(L, &ud) == sl_alloc) ((sl_allocstate *)ud)->hard = hard;
}

/* sl_close closes the VM and frees its allocator's state. */
void sl_close(lua_State *L) {
	void *ud;
	lua_Alloc f = lua_getallocf(L, &ud);
	if (f == sl_alloc) {
		/* LuaJIT's own allocator back, so that lua_close destroys its arena */
		sl_allocstate *a = ud;
		lua_setallocf(L, a->f, a->ud);
		lua_close(L);
		free(a);
		return;
	}
	lua_close(L);
}

int sl_loadbuffer(lua_State *L, const char *buf, size_t n, const char *name) {
	return luaL_loadbuffer(L, buf, n, name);
}

int sl_pcall(lua_State *L, int nargs, int nres) { return lua_pcall(L, nargs, nres, 0); }

const char *sl_tostring(lua_State *L, int idx, size_t *len) { return lua_tolstring(L, idx, len); }

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

/* sl_poll is what the check compiled into user loops calls: 1 when the
 * watchdog wrote the stop word, 2 when the VM's heap is over limit. It is
 * a C call, not a load written in Lua, because the JIT hoists FFI loads
 * out of loops (volatile or not): a load in the loop body would be read
 * once per trace entry, and a loop that never leaves its trace would
 * never see the stop. A call stays in the loop. */
int sl_poll(sl_batch *b, const uint64_t *total, double limit) {
	if (b->stop != 0) return 1;
	if (total && (double)*total > limit) return 2;
	return 0;
}

int sl_make_encoder(lua_State *L);
int sl_make_decoder(lua_State *L);
void *sl_gctotal_addr(lua_State *L);

static sl_api api = {sl_grow_out, sl_grow_pat, sl_grow_scr, sl_escape, sl_fmtnum, sl_column, sl_columns, sl_poll};

typedef struct { char *p; size_t n, cap; } dumpbuf;

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
	dumpbuf *d = ud;
	(void)L;
	if (d->n + sz > d->cap) {
		size_t c = d->cap ? d->cap * 2 : 4096;
		while (c < d->n + sz) c *= 2;
		char *q = realloc(d->p, c);
		if (!q) return 1;
		d->p = q;
		d->cap = c;
	}
	memcpy(d->p + d->n, p, sz);
	d->n += sz;
	return 0;
}

/* sl_compile compiles src in L; on success *out holds the bytecode (malloc'd,
 * with debug info, so errors keep their lines). Returns the load status; on
 * error the message is on top of L's stack. */
int sl_compile(lua_State *L, const char *src, size_t n, const char *name, char **out, size_t *outn) {
	int st = luaL_loadbuffer(L, src, n, name);
	if (st != 0) return st;
	dumpbuf d = {0, 0, 0};
	if (lua_dump(L, dump_writer, &d) != 0) { free(d.p); lua_pushstring(L, "cannot dump bytecode"); return LUA_ERRMEM; }
	lua_pop(L, 1);
	*out = d.p;
	*outn = d.n;
	return 0;
}

/* sl_gctotal_addr returns the address of the VM's count of allocated bytes
 * (global_State.gc.total), so that the checks compiled into user code can
 * bound memory with one load instead of a call; NULL when this LuaJIT's
 * layout is not the one expected (the checks then call collectgarbage every
 * 1024th time). LuaJIT (2.1, GC64) allocates the main lua_State and the
 * global_State together (GG_State), L->glref is the third 8-byte word of
 * the lua_State, and gc.total comes after allocf and allocd (and, in older
 * 2.1 versions, strhash, strmask and strnum before them). Every step is checked before memory is read: the global state
 * must lie just after L, and the word read must equal lua_gc's count. */
void *sl_gctotal_addr(lua_State *L) {
	uintptr_t l = (uintptr_t)L;
	uintptr_t g = ((uintptr_t *)L)[2];
	if (g < l + 64 || g > l + 512 || g % 8 != 0) return NULL;
	uint64_t want = (uint64_t)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + (uint64_t)lua_gc(L, LUA_GCCOUNTB, 0);
	/* 16: allocf, allocd, then gc (LuaJIT 2.1 since the string interning
	 * rework, Debian's 2.1-20230119); 32: strhash, strmask, strnum first */
	static const int offsets[] = {16, 32};
	for (int i = 0; i < 2; i++) {
		uint64_t *total = (uint64_t *)(g + offsets[i]);
		if (*total == want) return total;
	}
	return NULL;
}

static int sl_make_patterns(lua_State *L);

/* sl_host runs the host chunk with the batch and API addresses; the table
 * it returns gets two registry refs (init, run). Returns the status. */
int sl_host(lua_State *L, const char *src, size_t n, sl_batch *b, double memkb, double maxresult, const char *allow, const char *params, int *init_ref, int *run_ref) {
	int st = luaL_loadbuffer(L, src, n, "=sluice");
	if (st != 0) return st;
	lua_pushnumber(L, (lua_Number)(uintptr_t)b);
	lua_pushnumber(L, (lua_Number)(uintptr_t)&api);
	lua_pushnumber(L, memkb);
	lua_pushstring(L, allow);
	lua_pushcfunction(L, sl_make_encoder);
	lua_pushcfunction(L, sl_make_decoder);
	lua_pushnumber(L, (lua_Number)(uintptr_t)sl_gctotal_addr(L));
	lua_pushlightuserdata(L, b);
	lua_pushcclosure(L, sl_make_patterns, 1);
	lua_pushnumber(L, maxresult);
	lua_pushstring(L, params);
	st = lua_pcall(L, 10, 1, 0);
	if (st != 0) return st;
	lua_getfield(L, -1, "init");
	*init_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_getfield(L, -1, "run");
	*run_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_pop(L, 1);
	return 0;
}

/* sl_init loads the script's bytecode and runs host.init(chunk, fname).
 * Returns the status; the result (nil, or a string: an error text,
 * "timeout", "memory" or "nofunc") is left on the stack. */
int sl_init(lua_State *L, int init_ref, const char *bc, size_t n, const char *name, const char *fname) {
	lua_settop(L, 0);
	lua_rawgeti(L, LUA_REGISTRYINDEX, init_ref);
	int st = luaL_loadbuffer(L, bc, n, name);
	if (st != 0) return st;
	lua_pushstring(L, fname);
	return lua_pcall(L, 2, 1, 0);
}

/* sl_run calls host.run(fname, n): the whole batch in one crossing. */
int sl_run(lua_State *L, int run_ref, const char *fname, int n) {
	lua_settop(L, 0);
	lua_rawgeti(L, LUA_REGISTRYINDEX, run_ref);
	lua_pushstring(L, fname);
	lua_pushinteger(L, n);
	return lua_pcall(L, 2, 0, 0);
}

int sl_gckb(lua_State *L) { return lua_gc(L, LUA_GCCOUNT, 0); }

/* ---- json.encode of Lua values in C (tables, strings, numbers) ----
 * A lua_CFunction, so not compiled by the JIT, but a call costs one trace
 * stitch while the work (key sorting, escaping, number formatting) runs at C
 * speed. Upvalues: 1 json.null, 2 the row object, 3 a Lua function returning
 * the row's JSON, 4 the buffer (userdata). Keys are sorted bytewise, as Go
 * sorts map keys; the bytes are those of internal/jsonw. */

typedef struct { char *p; size_t n, cap; } encbuf;

static int encbuf_gc(lua_State *L) {
	encbuf *b = lua_touserdata(L, 1);
	free(b->p);
	b->p = NULL;
	return 0;
}

static void eb_reserve(lua_State *L, encbuf *b, size_t n) {
	if (b->n + n <= b->cap) return;
	size_t c = b->cap ? b->cap : 1024;
	while (c < b->n + n) c *= 2;
	char *q = realloc(b->p, c);
	if (!q) luaL_error(L, "json.encode: out of memory");
	b->p = q;
	b->cap = c;
}

static void eb_add(lua_State *L, encbuf *b, const char *s, size_t n) {
	eb_reserve(L, b, n);
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void eb_str(lua_State *L, encbuf *b, const char *s, size_t n) {
	eb_reserve(L, b, 6 * n + 2);
	b->n += (size_t)sl_escape(b->p + b->n, s, (int64_t)n);
}

static void eb_num(lua_State *L, encbuf *b, double x) {
	eb_reserve(L, b, 32);
	int n = sl_fmtnum(b->p + b->n, x);
	if (n < 0) luaL_error(L, "json.encode: %f is not a JSON number", x);
	b->n += (size_t)n;
}

typedef struct { const char *s; size_t n; int isnum; double num; int vidx; } enckey;

static int enckey_cmp(const void *a, const void *b) {
	const enckey *x = a, *y = b;
	size_t n = x->n < y->n ? x->n : y->n;
	int c = memcmp(x->s, y->s, n);
	if (c != 0) return c;
	return x->n < y->n ? -1 : x->n > y->n;
}

static void enc_value(lua_State *L, encbuf *b, int idx, int depth);

static void enc_table(lua_State *L, encbuf *b, int idx, int depth) {
	if (depth > 100) luaL_error(L, "json.encode: tables nested deeper than 100 (cyclic?)");
	luaL_checkstack(L, 4, "json.encode");
	size_t count = 0;
	double maxk = 0;
	int isarr = 1;
	lua_pushnil(L);
	while (lua_next(L, idx) != 0) {
		lua_pop(L, 1);
		count++;
		if (isarr && lua_type(L, -1) == LUA_TNUMBER) {
			double k = lua_tonumber(L, -1);
			if (k >= 1 && k == floor(k)) { if (k > maxk) maxk = k; }
			else isarr = 0;
		} else {
			isarr = 0;
		}
	}
	if (isarr && count > 0 && (double)count == maxk) {
		eb_add(L, b, "[", 1);
		for (size_t i = 1; i <= count; i++) {
			if (i > 1) eb_add(L, b, ",", 1);
			lua_rawgeti(L, idx, (int)i);
			enc_value(L, b, lua_gettop(L), depth + 1);
			lua_pop(L, 1);
		}
		eb_add(L, b, "]", 1);
		return;
	}
	enckey small[32];
	char smalltxt[4][32];
	enckey *keys = count <= 32 ? small : malloc(count * sizeof(enckey));
	char (*numtxt)[32] = smalltxt; /* number keys' text, not moved by qsort */
	size_t nnum = 0, numcap = 4;
	if (!keys) luaL_error(L, "json.encode: out of memory");
	size_t n = 0;
	/* small tables keep each key and value on the stack (no lookup again
	 * when writing); larger ones look values up by key */
	int onstack = count <= 64 && lua_checkstack(L, (int)(2 * count + 4));
	int base = lua_gettop(L);
	lua_pushnil(L);
	while (lua_next(L, idx) != 0) {
		enckey *k = &keys[n];
		if (onstack) {
			k->vidx = lua_gettop(L);
			lua_pushvalue(L, -2);
		} else {
			k->vidx = 0;
			lua_pop(L, 1);
		}
		int t = lua_type(L, -1);
		if (t == LUA_TSTRING) {
			k->s = lua_tolstring(L, -1, &k->n); /* kept alive by the table */
			k->isnum = 0;
		} else if (t == LUA_TNUMBER) {
			k->num = lua_tonumber(L, -1);
			if (nnum == numcap) {
				char (*q)[32] = malloc(numcap * 2 * 32);
				if (!q) luaL_error(L, "json.encode: out of memory");
				memcpy(q, numtxt, numcap * 32);
				/* repoint the keys already made */
				for (size_t j = 0; j < n; j++)
					if (keys[j].isnum) keys[j].s = q[(keys[j].s - numtxt[0]) / 32];
				if (numtxt != smalltxt) free(numtxt);
				numtxt = q;
				numcap *= 2;
			}
			int m = sl_fmtnum(numtxt[nnum], k->num);
			if (m < 0) m = 0;
			k->s = numtxt[nnum++];
			k->n = (size_t)m;
			k->isnum = 1;
		} else {
			if (keys != small) free(keys);
			luaL_error(L, "json.encode: a %s key cannot be a JSON key", lua_typename(L, t));
		}
		n++;
	}
	qsort(keys, n, sizeof(enckey), enckey_cmp);
	eb_add(L, b, "{", 1);
	for (size_t i = 0; i < n; i++) {
		enckey *k = &keys[i];
		if (i > 0) eb_add(L, b, ",", 1);
		eb_str(L, b, k->s, k->n);
		eb_add(L, b, ":", 1);
		if (k->vidx) {
			enc_value(L, b, k->vidx, depth + 1);
			continue;
		}
		if (k->isnum) lua_pushnumber(L, k->num);
		else lua_pushlstring(L, k->s, k->n);
		lua_rawget(L, idx);
		enc_value(L, b, lua_gettop(L), depth + 1);
		lua_pop(L, 1);
	}
	lua_settop(L, base);
	eb_add(L, b, "}", 1);
	if (keys != small) free(keys);
	if (numtxt != smalltxt) free(numtxt);
}

static void enc_value(lua_State *L, encbuf *b, int idx, int depth) {
	size_t n;
	const char *s;
	switch (lua_type(L, idx)) {
	case LUA_TSTRING:
		s = lua_tolstring(L, idx, &n);
		eb_str(L, b, s, n);
		return;
	case LUA_TNUMBER:
		eb_num(L, b, lua_tonumber(L, idx));
		return;
	case LUA_TBOOLEAN:
		if (lua_toboolean(L, idx)) eb_add(L, b, "true", 4);
		else eb_add(L, b, "false", 5);
		return;
	case LUA_TNIL:
		eb_add(L, b, "null", 4);
		return;
	case LUA_TTABLE:
		if (lua_rawequal(L, idx, lua_upvalueindex(1))) { eb_add(L, b, "null", 4); return; }
		if (lua_rawequal(L, idx, lua_upvalueindex(2))) {
			lua_pushvalue(L, lua_upvalueindex(3));
			lua_call(L, 0, 1);
			s = lua_tolstring(L, -1, &n);
			eb_add(L, b, s, n);
			lua_pop(L, 1);
			return;
		}
		enc_table(L, b, idx, depth);
		return;
	}
	luaL_error(L, "json.encode: a %s cannot be encoded", luaL_typename(L, idx));
}

static int sl_json_encode(lua_State *L) {
	encbuf *b = lua_touserdata(L, lua_upvalueindex(4));
	lua_settop(L, 1);
	b->n = 0;
	enc_value(L, b, 1, 0);
	lua_pushlstring(L, b->p, b->n);
	if (b->cap > (1 << 20)) { free(b->p); b->p = NULL; b->cap = 0; }
	return 1;
}

/* sl_make_encoder(null, row, rowjson) returns json.encode's C closure. */
int sl_make_encoder(lua_State *L) {
	lua_settop(L, 3);
	encbuf *b = lua_newuserdata(L, sizeof(encbuf));
	b->p = NULL;
	b->n = b->cap = 0;
	if (luaL_newmetatable(L, "sluice.encbuf")) {
		lua_pushcfunction(L, encbuf_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_setmetatable(L, -2);
	lua_pushcclosure(L, sl_json_encode, 4);
	return 1;
}

/* ---- json.decode in C ----
 * Upvalue 1 is json.null, what nulls inside objects and arrays become (a
 * top-level null is nil). Errors name the 1-based byte offset. Measured
 * against a decoder in Lua compiled by the JIT (about 5x slower: string
 * building does not compile well) and lua-cjson (about the same speed). */

typedef struct {
	lua_State *L;
	const char *s, *p, *end;
	char *tmp;
	size_t tmpcap;
} dec;

static void dec_fail(dec *d, const char *what) {
	free(d->tmp);
	d->tmp = NULL;
	luaL_error(d->L, "json.decode: %s at byte %d", what, (int)(d->p - d->s) + 1);
}

static void dec_ws(dec *d) {
	while (d->p < d->end && (*d->p == ' ' || *d->p == '\t' || *d->p == '\n' || *d->p == '\r')) d->p++;
}

static void dec_reserve(dec *d, size_t n) {
	if (n <= d->tmpcap) return;
	size_t c = d->tmpcap ? d->tmpcap * 2 : 256;
	while (c < n) c *= 2;
	char *q = realloc(d->tmp, c);
	if (!q) dec_fail(d, "out of memory");
	d->tmp = q;
	d->tmpcap = c;
}

static int hex4(const char *p) {
	int v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9') v |= c - '0';
		else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
		else return -1;
	}
	return v;
}

static size_t put_utf8(char *o, uint32_t c) {
	if (c < 0x80) { o[0] = (char)c; return 1; }
	if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
	if (c < 0x10000) { o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3F)); o[2] = (char)(0x80 | (c & 0x3F)); return 3; }
	o[0] = (char)(0xF0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3F)); o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
	return 4;
}

/* dec_string pushes the string starting after the opening quote. */
static void dec_string(dec *d) {
	const char *start = d->p;
	while (d->p < d->end && *d->p != '"' && *d->p != '\\' && (unsigned char)*d->p >= 0x20) d->p++;
	if (d->p < d->end && *d->p == '"') {
		lua_pushlstring(d->L, start, (size_t)(d->p - start));
		d->p++;
		return;
	}
	size_t n = (size_t)(d->p - start);
	dec_reserve(d, n + 64);
	memcpy(d->tmp, start, n);
	for (;;) {
		if (d->p >= d->end) dec_fail(d, "unterminated string");
		unsigned char c = (unsigned char)*d->p;
		dec_reserve(d, n + 8);
		if (c == '"') { d->p++; break; }
		if (c < 0x20) dec_fail(d, "control character in string");
		if (c != '\\') { d->tmp[n++] = (char)c; d->p++; continue; }
		if (d->p + 1 >= d->end) dec_fail(d, "unterminated string");
		char e = d->p[1];
		d->p += 2;
		switch (e) {
		case '"': d->tmp[n++] = '"'; break;
		case '\\': d->tmp[n++] = '\\'; break;
		case '/': d->tmp[n++] = '/'; break;
		case 'b': d->tmp[n++] = '\b'; break;
		case 'f': d->tmp[n++] = '\f'; break;
		case 'n': d->tmp[n++] = '\n'; break;
		case 'r': d->tmp[n++] = '\r'; break;
		case 't': d->tmp[n++] = '\t'; break;
		case 'u': {
			if (d->end - d->p < 4) dec_fail(d, "bad \\u escape");
			int cp = hex4(d->p);
			if (cp < 0) dec_fail(d, "bad \\u escape");
			d->p += 4;
			uint32_t r = (uint32_t)cp;
			if (cp >= 0xD800 && cp <= 0xDBFF && d->end - d->p >= 6 && d->p[0] == '\\' && d->p[1] == 'u') {
				int lo = hex4(d->p + 2);
				if (lo >= 0xDC00 && lo <= 0xDFFF) {
					r = 0x10000 + ((uint32_t)(cp - 0xD800) << 10) + (uint32_t)(lo - 0xDC00);
					d->p += 6;
				}
			}
			if (r >= 0xD800 && r <= 0xDFFF) r = 0xFFFD; /* a lone surrogate, as Go decodes it */
			n += put_utf8(d->tmp + n, r);
			break;
		}
		default:
			d->p -= 2;
			dec_fail(d, "bad escape");
		}
	}
	lua_pushlstring(d->L, d->tmp, n);
}

static void dec_value(dec *d, int depth);

static void dec_push_elem(dec *d, int depth) {
	dec_value(d, depth + 1);
	if (lua_isnil(d->L, -1)) {
		lua_pop(d->L, 1);
		lua_pushvalue(d->L, lua_upvalueindex(1));
	}
}

static void dec_value(dec *d, int depth) {
	if (depth > 1000) dec_fail(d, "nested too deep");
	if (!lua_checkstack(d->L, 4)) dec_fail(d, "nested too deep");
	dec_ws(d);
	if (d->p >= d->end) dec_fail(d, "unexpected end of input");
	char c = *d->p;
	if (c == '{') {
		d->p++;
		lua_createtable(d->L, 0, 4);
		dec_ws(d);
		if (d->p < d->end && *d->p == '}') { d->p++; return; }
		for (;;) {
			dec_ws(d);
			if (d->p >= d->end || *d->p != '"') dec_fail(d, d->p >= d->end ? "unexpected end of input" : "expected a string key");
			d->p++;
			dec_string(d);
			dec_ws(d);
			if (d->p >= d->end || *d->p != ':') dec_fail(d, d->p >= d->end ? "unexpected end of input" : "expected ':'");
			d->p++;
			dec_push_elem(d, depth);
			lua_rawset(d->L, -3);
			dec_ws(d);
			if (d->p >= d->end) dec_fail(d, "unexpected end of input");
			if (*d->p == '}') { d->p++; return; }
			if (*d->p != ',') dec_fail(d, "expected ',' or '}'");
			d->p++;
		}
	}
	if (c == '[') {
		d->p++;
		lua_createtable(d->L, 4, 0);
		dec_ws(d);
		if (d->p < d->end && *d->p == ']') { d->p++; return; }
		for (int i = 1;; i++) {
			dec_push_elem(d, depth);
			lua_rawseti(d->L, -2, i);
			dec_ws(d);
			if (d->p >= d->end) dec_fail(d, "unexpected end of input");
			if (*d->p == ']') { d->p++; return; }
			if (*d->p != ',') dec_fail(d, "expected ',' or ']'");
			d->p++;
		}
	}
	if (c == '"') { d->p++; dec_string(d); return; }
	if (c == 't' && d->end - d->p >= 4 && memcmp(d->p, "true", 4) == 0) { d->p += 4; lua_pushboolean(d->L, 1); return; }
	if (c == 'f' && d->end - d->p >= 5 && memcmp(d->p, "false", 5) == 0) { d->p += 5; lua_pushboolean(d->L, 0); return; }
	if (c == 'n' && d->end - d->p >= 4 && memcmp(d->p, "null", 4) == 0) { d->p += 4; lua_pushnil(d->L); return; }
	if (c == '-' || (c >= '0' && c <= '9')) {
		/* the JSON number grammar, then strtod on a NUL-terminated copy */
		const char *q = d->p;
		if (*q == '-') q++;
		if (q >= d->end || *q < '0' || *q > '9') dec_fail(d, "bad number");
		if (*q == '0') q++;
		else while (q < d->end && *q >= '0' && *q <= '9') q++;
		if (q < d->end && *q == '.') {
			q++;
			if (q >= d->end || *q < '0' || *q > '9') dec_fail(d, "bad number");
			while (q < d->end && *q >= '0' && *q <= '9') q++;
		}
		if (q < d->end && (*q == 'e' || *q == 'E')) {
			q++;
			if (q < d->end && (*q == '+' || *q == '-')) q++;
			if (q >= d->end || *q < '0' || *q > '9') dec_fail(d, "bad number");
			while (q < d->end && *q >= '0' && *q <= '9') q++;
		}
		char buf[64];
		size_t n = (size_t)(q - d->p);
		double x;
		if (n < sizeof buf) {
			memcpy(buf, d->p, n);
			buf[n] = 0;
			x = strtod(buf, NULL);
		} else {
			dec_reserve(d, n + 1);
			memcpy(d->tmp, d->p, n);
			d->tmp[n] = 0;
			x = strtod(d->tmp, NULL);
		}
		if (isinf(x)) {
			/* JSON has no infinity; gopher-lua's json.decode says the same */
			lua_pushlstring(d->L, d->p, n);
			free(d->tmp);
			d->tmp = NULL;
			luaL_error(d->L, "json.decode: number %s is out of range (JSON has no infinity)", lua_tostring(d->L, -1));
		}
		d->p = q;
		lua_pushnumber(d->L, x);
		return;
	}
	dec_fail(d, "unexpected character");
}

static int sl_json_decode(lua_State *L) {
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	dec d = {L, s, s, s + n, NULL, 0};
	lua_settop(L, 1);
	dec_value(&d, 0);
	dec_ws(&d);
	if (d.p < d.end) dec_fail(&d, "trailing characters");
	free(d.tmp);
	return 1;
}

/* sl_make_decoder(null) returns json.decode's C closure. */
int sl_make_decoder(lua_State *L) {
	lua_settop(L, 1);
	lua_pushcclosure(L, sl_json_decode, 1);
	return 1;
}

/* ---- string.find, match, gmatch and gsub that a timeout can stop ----
 * LuaJIT's own string.find, match, gmatch and gsub are C functions that
 * backtrack to the end: the checks compiled into user code are never reached
 * inside them, so a pattern such as ("a*"):rep(25).."b" on 30 bytes held a
 * VM (and a stream partition, and the process at shutdown) for ever. These
 * are our own implementation of Lua 5.1 patterns (reference manual §5.4.1),
 * written to give what LuaJIT's give, results and error messages alike
 * (TestPatternsMatchLuaJIT and FuzzPatternsMatchLuaJIT hold them to it):
 * a recursive backtracking matcher over the pattern's bytes, recursing only
 * where a choice may have to be undone (a quantifier, a capture), to at most
 * PM_MAXDEPTH levels as LuaJIT. It counts its work in steps, and every
 * PM_STEPS steps reads the batch's stop word; once the watchdog has written
 * it, the matcher calls the host's check function, which raises the timeout
 * (or the cancel) as user code's checks do. Upvalues of each function: 1 the
 * batch (light userdata), 2 check. */

#define PM_MAXCAPS 32   /* captures in one pattern, as LuaJIT */
#define PM_MAXDEPTH 200 /* nested matcher calls before "pattern too complex", as LuaJIT */
#define PM_STEPS 4096   /* steps between two looks at the stop word */
#define PM_OPEN (-1)    /* the length of a capture not closed yet */
#define PM_POSITION (-2) /* the length of a position capture, () */

typedef struct {
	lua_State *L;
	sl_batch *b;
	const char *subj, *subj_end; /* the subject */
	const char *pat_end;         /* the pattern ends here (or at its first NUL) */
	size_t steps;                /* steps since the last look at the stop word */
	int depth;                   /* nested pm_match calls */
	int ncap;                    /* captures opened so far */
	struct {
		const char *at;
		ptrdiff_t len; /* or PM_OPEN, PM_POSITION */
	} cap[PM_MAXCAPS];
} pm_state;

/* pm_step counts n steps of work; at every PM_STEPS it reads the stop word
 * and, when it is set, calls check, which raises unless the stop was meant
 * for an earlier row. */
static void pm_step(pm_state *ms, size_t n) {
	ms->steps += n;
	if (ms->steps < PM_STEPS) return;
	ms->steps = 0;
	if (ms->b->stop == 0) return;
	lua_pushvalue(ms->L, lua_upvalueindex(2));
	lua_call(ms->L, 0, 0);
}

/* pm_class_has tells whether byte c is in the class named by letter (%a,
 * %d...; an upper-case letter is the complement): 1 or 0, or -1 when the
 * letter names no class and %letter stands for the letter itself. Classes
 * are ASCII only, as LuaJIT's (no locale). */
static int pm_class_has(unsigned char letter, unsigned char c) {
	int lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z', digit = c >= '0' && c <= '9';
	int graph = c > 32 && c < 127, in;
	switch (letter | 0x20) {
	case 'a': in = lower || upper; break;
	case 'c': in = c < 32 || c == 127; break;
	case 'd': in = digit; break;
	case 'g': in = graph; break; /* LuaJIT knows Lua 5.2's %g */
	case 'l': in = lower; break;
	case 'p': in = graph && !lower && !upper && !digit; break;
	case 's': in = c == ' ' || (c >= '\t' && c <= '\r'); break;
	case 'u': in = upper; break;
	case 'w': in = lower || upper || digit; break;
	case 'x': in = digit || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); break;
	case 'z': in = c == 0; break;
	default: return -1;
	}
	return letter <= 'Z' ? !in : in;
}

/* pm_escaped_has: whether c matches %letter (a class, or the letter). */
static int pm_escaped_has(unsigned char letter, unsigned char c) {
	int in = pm_class_has(letter, c);
	return in < 0 ? letter == c : in;
}

/* pm_set_end returns the byte after the ']' closing the set that opens at
 * p ('['). A ']' first in the set (after the '^', if any) is a member, and
 * a '%' escapes the byte after it. */
static const char *pm_set_end(pm_state *ms, const char *p) {
	const char *q = p + 1;
	if (q < ms->pat_end && *q == '^') q++;
	for (;;) {
		if (q >= ms->pat_end) luaL_error(ms->L, "malformed pattern (missing ']')");
		if (*q++ == '%') {
			if (q >= ms->pat_end) luaL_error(ms->L, "malformed pattern (missing ']')");
			q++;
		}
		if (q < ms->pat_end && *q == ']') return q + 1;
	}
}

/* pm_set_has: whether c is in the set from p ('[') to close (its ']'):
 * escapes (%a, %]), ranges x-y and single bytes; a leading '^' inverts. */
static int pm_set_has(const char *p, const char *close, unsigned char c) {
	int member = 1;
	p++;
	if (*p == '^') {
		member = 0;
		p++;
	}
	for (; p < close; p++) {
		if (*p == '%') {
			p++;
			if (pm_escaped_has((unsigned char)*p, c)) return member;
		} else if (p + 2 < close && p[1] == '-') {
			if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2]) return member;
			p += 2;
		} else if ((unsigned char)*p == c) {
			return member;
		}
	}
	return !member;
}

/* pm_item_end returns the end of the single-byte item at p: '.', %x, a set
 * or a plain byte. */
static const char *pm_item_end(pm_state *ms, const char *p) {
	if (*p == '%') {
		if (p + 1 >= ms->pat_end) luaL_error(ms->L, "malformed pattern (ends with '%%')");
		return p + 2;
	}
	if (*p == '[') return pm_set_end(ms, p);
	return p + 1;
}

/* pm_item_has: whether the byte at s (if any) matches the item p..ep. */
static int pm_item_has(pm_state *ms, const char *s, const char *p, const char *ep) {
	if (s >= ms->subj_end) return 0;
	unsigned char c = (unsigned char)*s;
	switch (*p) {
	case '.': return 1;
	case '%': return pm_escaped_has((unsigned char)p[1], c);
	case '[': return pm_set_has(p, ep - 1, c);
	default: return (unsigned char)*p == c;
	}
}

static const char *pm_match(pm_state *ms, const char *s, const char *p);

/* pm_longest: item p..ep repeated as often as it matches from s, then
 * fewer and fewer times, until the rest of the pattern (ep+1) matches. */
static const char *pm_longest(pm_state *ms, const char *s, const char *p, const char *ep) {
	const char *t = s;
	while (pm_item_has(ms, t, p, ep)) t++;
	pm_step(ms, (size_t)(t - s));
	for (;; t--) {
		const char *e = pm_match(ms, t, ep + 1);
		if (e != NULL || t == s) return e;
	}
}

/* pm_shortest: the rest of the pattern (ep+1) tried after 0, 1, 2...
 * repetitions of item p..ep. */
static const char *pm_shortest(pm_state *ms, const char *s, const char *p, const char *ep) {
	for (;; s++) {
		const char *e = pm_match(ms, s, ep + 1);
		if (e != NULL || !pm_item_has(ms, s, p, ep)) return e;
	}
}

/* pm_capture opens a capture at s, '(' at p, and matches the rest. */
static const char *pm_capture(pm_state *ms, const char *s, const char *p) {
	if (ms->ncap >= PM_MAXCAPS) luaL_error(ms->L, "too many captures");
	int position = p + 1 < ms->pat_end && p[1] == ')';
	int i = ms->ncap++;
	ms->cap[i].at = s;
	ms->cap[i].len = position ? PM_POSITION : PM_OPEN;
	const char *e = pm_match(ms, s, p + (position ? 2 : 1));
	if (e == NULL) ms->ncap--;
	return e;
}

/* pm_close_capture closes the innermost open capture at s, ')' at p, and
 * matches the rest. */
static const char *pm_close_capture(pm_state *ms, const char *s, const char *p) {
	int i = ms->ncap - 1;
	while (i >= 0 && ms->cap[i].len != PM_OPEN) i--;
	if (i < 0) luaL_error(ms->L, "invalid pattern capture");
	ms->cap[i].len = s - ms->cap[i].at;
	const char *e = pm_match(ms, s, p + 1);
	if (e == NULL) ms->cap[i].len = PM_OPEN;
	return e;
}

/* pm_balanced: after %bxy at p, the end of the balanced x...y at s. */
static const char *pm_balanced(pm_state *ms, const char *s, const char *p) {
	if (p + 3 >= ms->pat_end) luaL_error(ms->L, "unbalanced pattern");
	char open = p[2], close = p[3];
	if (s >= ms->subj_end || *s != open) return NULL;
	int nest = 1;
	for (const char *t = s + 1; t < ms->subj_end; t++) {
		if (*t == close) {
			if (--nest == 0) {
				pm_step(ms, (size_t)(t - s));
				return t + 1;
			}
		} else if (*t == open) {
			nest++;
		}
	}
	pm_step(ms, (size_t)(ms->subj_end - s));
	return NULL;
}

/* pm_backref: after %n at p, the end of a copy of capture n at s. */
static const char *pm_backref(pm_state *ms, const char *s, const char *p) {
	int i = p[1] - '1';
	if (i < 0 || i >= ms->ncap || ms->cap[i].len == PM_OPEN) luaL_error(ms->L, "invalid capture index");
	ptrdiff_t len = ms->cap[i].len;
	if (len == PM_POSITION || ms->subj_end - s < len) return NULL; /* a position is never matched */
	pm_step(ms, (size_t)len / 64);
	return memcmp(s, ms->cap[i].at, (size_t)len) == 0 ? s + len : NULL;
}

/* pm_match returns the end of a match of the pattern from p to its end at
 * s, or NULL. It loops along the pattern while the way is certain and
 * recurses where a choice may have to be undone. */
static const char *pm_match(pm_state *ms, const char *s, const char *p) {
	if (++ms->depth > PM_MAXDEPTH) luaL_error(ms->L, "pattern too complex");
	pm_step(ms, 1);
	const char *end = ms->pat_end;
	for (;;) {
		if (p == end) break;
		if (*p == '(') {
			s = pm_capture(ms, s, p);
			break;
		}
		if (*p == ')') {
			s = pm_close_capture(ms, s, p);
			break;
		}
		if (*p == '$' && p + 1 == end) {
			if (s != ms->subj_end) s = NULL;
			break;
		}
		if (*p == '%' && p + 1 < end) {
			if (p[1] == 'b') {
				s = pm_balanced(ms, s, p);
				if (s == NULL) break;
				p += 4;
				continue;
			}
			if (p[1] == 'f') {
				if (p + 2 >= end || p[2] != '[') luaL_error(ms->L, "missing '[' after '%%f' in pattern");
				const char *ep = pm_set_end(ms, p + 2);
				unsigned char before = s > ms->subj ? (unsigned char)s[-1] : 0;
				unsigned char at = s < ms->subj_end ? (unsigned char)*s : 0;
				if (pm_set_has(p + 2, ep - 1, before) || !pm_set_has(p + 2, ep - 1, at)) {
					s = NULL;
					break;
				}
				p = ep;
				continue;
			}
			if (p[1] >= '0' && p[1] <= '9') {
				s = pm_backref(ms, s, p);
				if (s == NULL) break;
				p += 2;
				continue;
			}
		}
		const char *ep = pm_item_end(ms, p);
		int hit = pm_item_has(ms, s, p, ep);
		char quantifier = ep < end ? *ep : 0;
		if (quantifier == '?') {
			const char *e;
			if (hit && (e = pm_match(ms, s + 1, ep + 1)) != NULL) {
				s = e;
				break;
			}
			p = ep + 1;
			continue;
		}
		if (quantifier == '*') {
			s = pm_longest(ms, s, p, ep);
			break;
		}
		if (quantifier == '+') {
			s = hit ? pm_longest(ms, s + 1, p, ep) : NULL;
			break;
		}
		if (quantifier == '-') {
			s = pm_shortest(ms, s, p, ep);
			break;
		}
		if (!hit) {
			s = NULL;
			break;
		}
		s++;
		p = ep;
	}
	ms->depth--;
	return s;
}

/* pm_push_capture pushes capture i of the match s..e: its text, or its
 * position for (); capture 0 of a pattern without captures is the match. */
static void pm_push_capture(pm_state *ms, int i, const char *s, const char *e) {
	if (i >= ms->ncap) {
		if (i > 0) luaL_error(ms->L, "invalid capture index");
		lua_pushlstring(ms->L, s, (size_t)(e - s));
	} else if (ms->cap[i].len == PM_OPEN) {
		luaL_error(ms->L, "unfinished capture");
	} else if (ms->cap[i].len == PM_POSITION) {
		lua_pushinteger(ms->L, ms->cap[i].at - ms->subj + 1);
	} else {
		lua_pushlstring(ms->L, ms->cap[i].at, (size_t)ms->cap[i].len);
	}
}

/* pm_push_captures pushes the captures of the match s..e (the match itself
 * when there are none and whole is set) and returns how many. */
static int pm_push_captures(pm_state *ms, const char *s, const char *e, int whole) {
	int n = ms->ncap == 0 && whole ? 1 : ms->ncap;
	luaL_checkstack(ms->L, n, "too many captures");
	for (int i = 0; i < n; i++) pm_push_capture(ms, i, s, e);
	return n;
}

/* pm_start sets ms up for subject s (n bytes) and pattern p, which ends at
 * its first NUL (or its plen bytes) as LuaJIT's does. */
static void pm_start(pm_state *ms, lua_State *L, const char *s, size_t n, const char *p, size_t plen) {
	ms->L = L;
	ms->b = lua_touserdata(L, lua_upvalueindex(1));
	ms->subj = s;
	ms->subj_end = s + n;
	const char *nul = memchr(p, '\0', plen);
	ms->pat_end = nul != NULL ? nul : p + plen;
	ms->steps = 0;
	ms->depth = 0;
	ms->ncap = 0;
}

/* pm_try matches the pattern from p at s, from a clean state. */
static const char *pm_try(pm_state *ms, const char *s, const char *p) {
	ms->ncap = 0;
	ms->depth = 0;
	return pm_match(ms, s, p);
}

/* pm_is_pattern: whether p has a byte that makes find match a pattern
 * rather than search for the bytes (LuaJIT looks at all of them). */
static int pm_is_pattern(const char *p, size_t plen) {
	for (size_t i = 0; i < plen; i++) {
		switch (p[i]) {
		case '^': case '$': case '*': case '+': case '?': case '.': case '(': case '[': case '%': case '-':
			return 1;
		}
	}
	return 0;
}

/* pm_search: the first copy of p (plen bytes) in s..end, or NULL. */
static const char *pm_search(pm_state *ms, const char *s, const char *end, const char *p, size_t plen) {
	if (plen == 0) return s;
	for (;;) {
		if ((size_t)(end - s) < plen) return NULL;
		const char *q = memchr(s, p[0], (size_t)(end - s) - plen + 1);
		if (q == NULL) return NULL;
		pm_step(ms, (size_t)(q - s) / 64 + plen / 64 + 1);
		if (memcmp(q + 1, p + 1, plen - 1) == 0) return q;
		s = q + 1;
	}
}

/* pm_find_or_match is string.find (find set) and string.match: init is a
 * 1-based position, counted from the end when negative, brought into the
 * subject. */
static int pm_find_or_match(lua_State *L, int find) {
	size_t n, plen;
	const char *s = luaL_checklstring(L, 1, &n);
	const char *p = luaL_checklstring(L, 2, &plen);
	lua_Integer init = luaL_optinteger(L, 3, 1);
	if (init < 0) init += (lua_Integer)n + 1;
	size_t from = init <= 1 ? 0 : (uint64_t)(init - 1) > n ? n : (size_t)(init - 1);
	pm_state ms;
	pm_start(&ms, L, s, n, p, plen);
	if (find && (lua_toboolean(L, 4) || !pm_is_pattern(p, plen))) {
		const char *at = pm_search(&ms, s + from, s + n, p, plen);
		if (at == NULL) {
			lua_pushnil(L);
			return 1;
		}
		lua_pushinteger(L, at - s + 1);
		lua_pushinteger(L, (lua_Integer)(at - s) + (lua_Integer)plen);
		return 2;
	}
	int anchored = p < ms.pat_end && *p == '^';
	if (anchored) p++;
	for (const char *at = s + from;; at++) {
		const char *e = pm_try(&ms, at, p);
		if (e != NULL) {
			if (!find) return pm_push_captures(&ms, at, e, 1);
			lua_pushinteger(L, at - s + 1);
			lua_pushinteger(L, e - s);
			return 2 + pm_push_captures(&ms, at, e, 0);
		}
		if (anchored || at >= ms.subj_end) break;
	}
	lua_pushnil(L);
	return 1;
}

static int pm_find(lua_State *L) { return pm_find_or_match(L, 1); }
static int pm_matchfn(lua_State *L) { return pm_find_or_match(L, 0); }

/* pm_gmatch_next is gmatch's iterator: upvalues 1 the batch, 2 check, 3
 * the subject, 4 the pattern (a '^' in it is a plain byte, as in LuaJIT),
 * 5 the offset to go on from. */
static int pm_gmatch_next(lua_State *L) {
	size_t n, plen;
	const char *s = lua_tolstring(L, lua_upvalueindex(3), &n);
	const char *p = lua_tolstring(L, lua_upvalueindex(4), &plen);
	pm_state ms;
	pm_start(&ms, L, s, n, p, plen);
	for (const char *at = s + lua_tointeger(L, lua_upvalueindex(5)); at <= ms.subj_end; at++) {
		const char *e = pm_try(&ms, at, p);
		if (e == NULL) continue;
		/* after an empty match, go on one byte further */
		lua_pushinteger(L, (e - s) + (e == at));
		lua_replace(L, lua_upvalueindex(5));
		return pm_push_captures(&ms, at, e, 1);
	}
	return 0;
}

static int pm_gmatch(lua_State *L) {
	luaL_checkstring(L, 1);
	luaL_checkstring(L, 2);
	lua_settop(L, 2);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_pushvalue(L, lua_upvalueindex(2));
	lua_pushvalue(L, 1);
	lua_pushvalue(L, 2);
	lua_pushinteger(L, 0);
	lua_pushcclosure(L, pm_gmatch_next, 5);
	return 1;
}

/* pm_add_template adds gsub's replacement string (argument 3) for the
 * match s..e: %0 the match, %1-%9 a capture, % before any other byte that
 * byte, and a '%' at the very end a NUL byte, as LuaJIT. */
static void pm_add_template(pm_state *ms, luaL_Buffer *b, const char *s, const char *e) {
	size_t n;
	const char *t = lua_tolstring(ms->L, 3, &n);
	const char *end = t + n;
	while (t < end) {
		const char *pct = memchr(t, '%', (size_t)(end - t));
		if (pct == NULL) {
			luaL_addlstring(b, t, (size_t)(end - t));
			return;
		}
		luaL_addlstring(b, t, (size_t)(pct - t));
		t = pct + 1;
		if (t == end) {
			luaL_addchar(b, '\0');
			return;
		}
		char c = *t++;
		if (c == '0') {
			luaL_addlstring(b, s, (size_t)(e - s));
		} else if (c >= '1' && c <= '9') {
			pm_push_capture(ms, c - '1', s, e);
			luaL_addvalue(b);
		} else {
			luaL_addchar(b, c);
		}
	}
}

/* pm_add_replacement adds what replaces the match s..e: from the template,
 * the function's result or the table's value at the first capture; nil or
 * false keeps the match. */
static void pm_add_replacement(pm_state *ms, luaL_Buffer *b, const char *s, const char *e) {
	lua_State *L = ms->L;
	int type = lua_type(L, 3);
	if (type == LUA_TFUNCTION) {
		lua_pushvalue(L, 3);
		lua_call(L, pm_push_captures(ms, s, e, 1), 1);
	} else if (type == LUA_TTABLE) {
		pm_push_capture(ms, 0, s, e);
		lua_gettable(L, 3);
	} else {
		pm_add_template(ms, b, s, e);
		return;
	}
	if (!lua_toboolean(L, -1)) {
		lua_pop(L, 1);
		lua_pushlstring(L, s, (size_t)(e - s));
	} else if (!lua_isstring(L, -1)) {
		luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
	}
	luaL_addvalue(b);
}

/* pm_gsub is string.gsub: at most max replacements (argument 4); after an
 * empty match the next byte is copied and matching goes on after it. */
static int pm_gsub(lua_State *L) {
	size_t n, plen;
	const char *s = luaL_checklstring(L, 1, &n);
	const char *p = luaL_checklstring(L, 2, &plen);
	int type = lua_type(L, 3);
	lua_Integer max = luaL_optinteger(L, 4, (lua_Integer)n + 1);
	luaL_argcheck(L, type == LUA_TNUMBER || type == LUA_TSTRING || type == LUA_TFUNCTION || type == LUA_TTABLE, 3,
		"string/function/table expected");
	lua_settop(L, 3);
	pm_state ms;
	pm_start(&ms, L, s, n, p, plen);
	int anchored = p < ms.pat_end && *p == '^';
	if (anchored) p++;
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	lua_Integer count = 0;
	const char *at = s;
	while (count < max) {
		const char *e = pm_try(&ms, at, p);
		if (e != NULL) {
			count++;
			pm_add_replacement(&ms, &b, at, e);
		}
		if (e != NULL && e > at) {
			at = e;
		} else if (at < ms.subj_end) {
			luaL_addchar(&b, *at++);
		} else {
			break;
		}
		if (anchored) break;
	}
	luaL_addlstring(&b, at, (size_t)(ms.subj_end - at));
	luaL_pushresult(&b);
	lua_pushinteger(L, count);
	return 2;
}

/* sl_make_patterns(check) returns find, match, gmatch and gsub; the batch
 * is the closure's upvalue (sl_host sets it). */
static int sl_make_patterns(lua_State *L) {
	luaL_checktype(L, 1, LUA_TFUNCTION);
	lua_CFunction fns[] = {pm_find, pm_matchfn, pm_gmatch, pm_gsub};
	for (int i = 0; i < 4; i++) {
		lua_pushvalue(L, lua_upvalueindex(1));
		lua_pushvalue(L, 1);
		lua_pushcclosure(L, fns[i], 2);
	}
	return 4;
}
