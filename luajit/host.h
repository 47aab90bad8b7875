// The C side of the LuaJIT engine: the batch header the Go side fills and the
// host module reads over FFI, and the helpers the host module calls over FFI.
// The same declarations are given to ffi.cdef (see host.lua).
#ifndef SLUICE_LUAJIT_HOST_H
#define SLUICE_LUAJIT_HOST_H
#include <stdint.h>
#include <stddef.h>
#include <lua.h>

typedef struct sl_batch {
	/* input cells, column-major: cell (c, i) is at c*nrows + i */
	uint8_t *tag;
	double *num;
	int32_t *off;
	int32_t *len;
	int64_t cells_cap;
	/* column names (in the arena) and the columns sorted by name */
	int32_t *name_off;
	int32_t *name_len;
	int32_t *order;
	int64_t cols_cap;
	char *arena;
	int64_t arena_len, arena_cap;
	int32_t nrows, ncols;
	int32_t all; /* 1 once every column of the batch is laid out */
	/* progress and interruption */
	volatile int32_t cur;  /* row running, written by Lua, read by the watchdog */
	volatile int32_t stop; /* row+1 to interrupt, -1 to cancel the batch; written by the watchdog */
	int32_t done;          /* rows run */
	/* results per row */
	uint8_t *rtag;
	double *rnum;
	int64_t *roff;
	int64_t *rlen;
	int64_t rcap;
	/* result bytes (strings, JSON, error texts) and row patches */
	char *out;
	int64_t out_len, out_cap;
	char *pat;
	int64_t pat_len, pat_cap;
	/* scratch for json.encode */
	char *scr;
	int64_t scr_cap;
	uintptr_t handle; /* cgo.Handle of the Go vm, for the column callbacks */
	/* the host modules' calls of the batch, as JSON in out (side_len 0:
	 * none), and the log lines the batch may write */
	int64_t side_off, side_len;
	int32_t logroom;
} sl_batch;

int sl_grow_out(sl_batch *b, int64_t need);
int sl_grow_pat(sl_batch *b, int64_t need);
int sl_grow_scr(sl_batch *b, int64_t need);
int64_t sl_escape(char *dst, const char *s, int64_t n);
int sl_fmtnum(char *dst, double x);
int32_t sl_column(sl_batch *b, const char *k, size_t n);
int32_t sl_columns(sl_batch *b);

void sl_free(void *p);
void *sl_realloc(void *p, size_t n);

/* the Go side */
int sl_loadbuffer(lua_State *L, const char *buf, size_t n, const char *name);
int sl_pcall(lua_State *L, int nargs, int nres);
lua_State *sl_newstate(void);
void sl_sethardlimit(lua_State *L, size_t hard);
void sl_close(lua_State *L);
const char *sl_tostring(lua_State *L, int idx, size_t *len);
int sl_compile(lua_State *L, const char *src, size_t n, const char *name, char **out, size_t *outn);
int sl_host(lua_State *L, const char *src, size_t n, sl_batch *b, double memkb, double maxresult, const char *allow, const char *params, int *init_ref, int *run_ref);
int sl_init(lua_State *L, int init_ref, const char *bc, size_t n, const char *name, const char *fname);
int sl_run(lua_State *L, int run_ref, const char *fname, int n);
int sl_gckb(lua_State *L);
void *sl_gctotal_addr(lua_State *L);
#endif
