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

lua_State *sl_newstate(void) {
	lua_State *L = luaL_newstate();
	if (L) luaL_openlibs(L);
	return L;
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
} sl_api;

static sl_api api = {sl_grow_out, sl_grow_pat, sl_grow_scr, sl_escape, sl_fmtnum, sl_column, sl_columns};

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

/* sl_host runs the host chunk with the batch and API addresses; the table
 * it returns gets two registry refs (init, run). Returns the status. */
int sl_host(lua_State *L, const char *src, size_t n, sl_batch *b, double memkb, const char *allow, int *init_ref, int *run_ref) {
	int st = luaL_loadbuffer(L, src, n, "=sluice");
	if (st != 0) return st;
	lua_pushnumber(L, (lua_Number)(uintptr_t)b);
	lua_pushnumber(L, (lua_Number)(uintptr_t)&api);
	lua_pushnumber(L, memkb);
	lua_pushstring(L, allow);
	st = lua_pcall(L, 4, 1, 0);
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
