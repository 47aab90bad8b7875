package luavm

import (
	"errors"
	"strings"
	"unsafe"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicedb/sluice/luavm/internal/pattern"
)

// The pattern functions of the string library (find, match, gmatch and
// gsub) on luavm's own Lua 5.1 matcher (internal/pattern), which the VM's
// context stops: gopher-lua's own run the backtracking matcher inside one
// builtin call that no timeout reaches, so one pathological pattern held a
// stream partition for good and kept the process from exiting. Results are
// gopher-lua's, but where gopher-lua departs from Lua 5.1 (%f, see the
// package's doc).

// matchDone is the channel that stops a match: the VM's context's (closed
// by the watchdog at the deadline), nil when calls have no time limit.
func matchDone(L *lua.LState) <-chan struct{} {
	if ctx := L.Context(); ctx != nil {
		return ctx.Done()
	}
	return nil
}

// findPattern runs pattern.Find and raises its errors as Lua errors, fn
// naming the library function.
func findPattern(L *lua.LState, fn, pat, str string, offset, limit int) []*pattern.MatchData {
	// The matcher only reads src; no copy of str is needed.
	src := unsafe.Slice(unsafe.StringData(str), len(str))
	mds, err := pattern.Find(pat, src, offset, limit, matchDone(L))
	if errors.Is(err, pattern.ErrInterrupted) {
		L.RaiseError("%s: interrupted (pattern %q)", fn, shorten(pat))
	}
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	return mds
}

// shorten cuts a pattern for an error message.
func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// pushCaptures pushes md's captures (positions as numbers) and returns how
// many; whole is pushed when the pattern has none.
func pushCaptures(L *lua.LState, str string, md *pattern.MatchData, whole bool) int {
	if md.CaptureLength() == 2 {
		if !whole {
			return 0
		}
		L.Push(lua.LString(str[md.Capture(0):md.Capture(1)]))
		return 1
	}
	for i := 2; i < md.CaptureLength(); i += 2 {
		if md.IsPosCapture(i) {
			L.Push(lua.LNumber(md.Capture(i)))
		} else {
			L.Push(lua.LString(str[md.Capture(i):md.Capture(i+1)]))
		}
	}
	return md.CaptureLength()/2 - 1
}

// strFind is gopher-lua's string.find on the interruptible matcher.
func strFind(L *lua.LState) int {
	str := L.CheckString(1)
	pat := L.CheckString(2)
	if len(pat) == 0 {
		L.Push(lua.LNumber(1))
		L.Push(lua.LNumber(0))
		return 2
	}
	init := stringIndex(str, L.OptInt(3, 1))
	plain := L.GetTop() == 4 && lua.LVAsBool(L.Get(4))
	if plain {
		pos := strings.Index(str[init:], pat)
		if pos < 0 {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(lua.LNumber(init + pos + 1))
		L.Push(lua.LNumber(init + pos + len(pat)))
		return 2
	}
	mds := findPattern(L, "string.find", pat, str, init, 1)
	if len(mds) == 0 {
		L.Push(lua.LNil)
		return 1
	}
	md := mds[0]
	L.Push(lua.LNumber(md.Capture(0) + 1))
	L.Push(lua.LNumber(md.Capture(1)))
	return 2 + pushCaptures(L, str, md, false)
}

// strMatch is gopher-lua's string.match on the interruptible matcher.
func strMatch(L *lua.LState) int {
	str := L.CheckString(1)
	pat := L.CheckString(2)
	offset := L.OptInt(3, 1)
	if offset < 0 {
		offset = len(str) + offset + 1
	}
	offset = max(offset-1, 0)
	mds := findPattern(L, "string.match", pat, str, offset, 1)
	if len(mds) == 0 {
		L.Push(lua.LNil)
		return 1
	}
	return pushCaptures(L, str, mds[0], true)
}

// gmatchState is the iterator state of string.gmatch: every match, found
// when gmatch is called (as gopher-lua does).
type gmatchState struct {
	str     string
	next    int
	matches []*pattern.MatchData
}

// strGmatch is gopher-lua's string.gmatch on the interruptible matcher.
func strGmatch(iter *lua.LFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		str := L.CheckString(1)
		pat := L.CheckString(2)
		mds := findPattern(L, "string.gmatch", pat, str, 0, -1)
		ud := L.NewUserData()
		ud.Value = &gmatchState{str: str, matches: mds}
		L.Push(iter)
		L.Push(ud)
		return 2
	}
}

func gmatchIter(L *lua.LState) int {
	st, ok := L.CheckUserData(1).Value.(*gmatchState)
	if !ok {
		L.ArgError(1, "gmatch state expected")
	}
	if st.next >= len(st.matches) {
		return 0
	}
	md := st.matches[st.next]
	st.next++
	return pushCaptures(L, st.str, md, true)
}

// stringIndex is gopher-lua's luaIndex2StringIndex for a start index: a
// Lua string index (1-based, negative from the end) as a 0-based offset,
// clamped to str as Lua 5.1 does (gopher-lua's slices past the end, a Go
// panic).
func stringIndex(str string, i int) int {
	if i != 0 {
		i--
	}
	if i < 0 {
		i = len(str) + i + 1
	}
	return min(max(i, 0), len(str))
}

// installPatterns replaces the string library's pattern functions.
func (vm *VM) installPatterns(str *lua.LTable) {
	L := vm.L
	str.RawSetString("find", L.NewFunction(strFind))
	str.RawSetString("match", L.NewFunction(strMatch))
	gmatch := L.NewFunction(strGmatch(L.NewFunction(gmatchIter)))
	str.RawSetString("gmatch", gmatch)
	str.RawSetString("gfind", gmatch)
}
