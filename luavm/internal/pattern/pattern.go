// Package pattern is luavm's Lua 5.1 pattern matcher (reference manual
// §5.4.1), behind string.find, match, gmatch and gsub, written here so that
// a match can be stopped. A Lua pattern is matched by backtracking, and a
// pattern such as ("a*"):rep(25).."b" on 30 bytes backtracks for longer
// than the age of the universe; gopher-lua's own matcher runs inside one
// builtin call, where the VM's context is never looked at. Find counts the
// matcher's steps and looks at a done channel every stepsPerCheck of them.
//
// Matches are Lua 5.1's, which are gopher-lua's but where gopher-lua's
// matcher departs from Lua (see pmDeparts in the tests): %f is a frontier
// (gopher-lua: the letter f), a '-' after a range or a class in a set is a
// literal '-', a pattern ending in '%' or in an incomplete %b or %f is an
// error, a back-reference to a position capture matches nothing (pm: a
// panic or a match), and a pattern has at most 32 captures.
package pattern

import (
	"errors"
	"fmt"
)

// maxCaptures is Lua 5.1's LUA_MAXCAPTURES.
const maxCaptures = 32

// The length of a capture while it is open, and of a position capture.
const (
	capOpen     = -1
	capPosition = -2
)

// Error is a malformed pattern, or a back-reference that names no closed
// capture; Pos is the 0-based byte offset in the pattern.
type Error struct {
	Pos     int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (at byte %d of the pattern)", e.Message, e.Pos+1)
}

// ErrInterrupted is returned by Find when done was closed during the match.
var ErrInterrupted = errors.New("pattern match interrupted")

// stepsPerCheck is how many matcher steps run between two looks at done: a
// step is a few nanoseconds, so a stop is seen within tens of microseconds.
const stepsPerCheck = 4096

// MatchData is one match: its bounds and its captures' as pairs of byte
// offsets (index 0 and 1 the whole match, then two per capture). Each entry
// is offset<<1, with the low bit set for a position capture, whose two
// entries both hold its Lua (1-based) position.
type MatchData struct {
	captures []uint32
}

// CaptureLength is the number of entries: 2 for the whole match plus 2 per
// capture.
func (md *MatchData) CaptureLength() int { return len(md.captures) }

// IsPosCapture reports whether entry idx belongs to a position capture.
func (md *MatchData) IsPosCapture(idx int) bool { return md.captures[idx]&1 == 1 }

// Capture is entry idx: a byte offset, or a position capture's position.
func (md *MatchData) Capture(idx int) int { return int(md.captures[idx] >> 1) }

// interrupted unwinds the matcher's recursion once done is closed; Find
// recovers it (as it recovers a *Error raised during the match).
type interrupted struct{}

// matcher is one Find's state: the pattern, the subject, the captures of
// the attempt under way, and the step count.
type matcher struct {
	pat      string
	src      []byte
	level    int // captures opened so far in this attempt
	capStart [maxCaptures]int
	capLen   [maxCaptures]int // a length, capOpen or capPosition
	steps    uint
	done     <-chan struct{}
}

// Find returns the matches of p in src from offset on, at most limit of
// them (< 0: all). After an empty match the next is looked for one byte
// on, after a longer one where it ended; a pattern anchored with '^' is
// tried at offset only. A nil done never stops it; once done is closed,
// Find returns ErrInterrupted. A malformed pattern is a *Error, whether or
// not src could match.
func Find(p string, src []byte, offset, limit int, done <-chan struct{}) (matches []*MatchData, err error) {
	start := 0
	anchored := len(p) > 0 && p[0] == '^'
	if anchored {
		start = 1
	}
	if err := validate(p, start); err != nil {
		return nil, err
	}
	m := &matcher{pat: p, src: src, done: done}
	defer func() {
		if v := recover(); v != nil {
			switch v := v.(type) {
			case *Error:
				matches, err = nil, v
			case interrupted:
				matches, err = nil, ErrInterrupted
			default:
				panic(v)
			}
		}
	}()
	matches = []*MatchData{}
	for s := offset; s <= len(src); {
		m.level = 0
		e := m.match(s, start)
		if e >= 0 {
			matches = append(matches, m.result(s, e))
		}
		if e > s {
			s = e
		} else {
			s++
		}
		if len(matches) == limit || anchored {
			break
		}
	}
	return matches, nil
}

// result is the match of src[s:e] with the captures of the attempt.
func (m *matcher) result(s, e int) *MatchData {
	c := make([]uint32, 2+2*m.level)
	c[0], c[1] = uint32(s)<<1, uint32(e)<<1
	for i := range m.level {
		if m.capLen[i] == capPosition {
			pos := uint32(m.capStart[i]+1)<<1 | 1
			c[2+2*i], c[3+2*i] = pos, pos
		} else {
			c[2+2*i], c[3+2*i] = uint32(m.capStart[i])<<1, uint32(m.capStart[i]+m.capLen[i])<<1
		}
	}
	return &MatchData{captures: c}
}

// validate rejects a malformed pattern before matching, so that the error
// does not depend on the subject: p from start on is a sequence of items,
// each one of '(', ')', %b followed by two bytes, %f followed by a set, a
// back-reference %1-%9, or a single-byte class with an optional '*', '+',
// '-' or '?'. Back-references are checked when they are reached, as Lua
// does (a %2 that a failing prefix never reaches is no error), except %0,
// which can never be valid.
func validate(p string, start int) error {
	opened, open := 0, 0 // captures opened in all, still open
	for i := start; i < len(p); {
		switch p[i] {
		case '(':
			if opened == maxCaptures {
				return &Error{i, "too many captures"}
			}
			opened++
			if i+1 < len(p) && p[i+1] == ')' {
				i += 2 // a position capture
				continue
			}
			open++
			i++
			continue
		case ')':
			if open == 0 {
				return &Error{i, "invalid pattern capture"}
			}
			open--
			i++
			continue
		case '%':
			if i+1 == len(p) {
				return &Error{i, "malformed pattern (ends with '%')"}
			}
			switch c := p[i+1]; {
			case c == 'b':
				if i+3 >= len(p) {
					return &Error{i, "malformed pattern (missing arguments to '%b')"}
				}
				i += 4
				continue
			case c == 'f':
				if i+2 == len(p) || p[i+2] != '[' {
					return &Error{i, "missing '[' after '%f' in pattern"}
				}
				end, err := setEnd(p, i+2)
				if err != nil {
					return err
				}
				i = end
				continue
			case c == '0':
				return &Error{i, "invalid capture index %0"}
			case c >= '1' && c <= '9':
				i += 2
				continue
			}
		}
		end, err := itemEnd(p, i)
		if err != nil {
			return err
		}
		i = end
		if i < len(p) && (p[i] == '*' || p[i] == '+' || p[i] == '-' || p[i] == '?') {
			i++
		}
	}
	if open > 0 {
		return &Error{len(p), "unfinished capture"}
	}
	return nil
}

// itemEnd is the offset after the single-byte class at p[i]: '.', a byte, a
// %-escape or a set.
func itemEnd(p string, i int) (int, error) {
	switch p[i] {
	case '%':
		if i+1 == len(p) {
			return 0, &Error{i, "malformed pattern (ends with '%')"}
		}
		return i + 2, nil
	case '[':
		return setEnd(p, i)
	}
	return i + 1, nil
}

// setEnd is the offset after the set opening at p[i]: a ']' right after '['
// or "[^" is a member, not the end, and so is one escaped with '%'.
func setEnd(p string, i int) (int, error) {
	open := i
	i++
	if i < len(p) && p[i] == '^' {
		i++
	}
	for first := true; ; first = false {
		if i == len(p) {
			return 0, &Error{open, "malformed pattern (missing ']')"}
		}
		if p[i] == ']' && !first {
			return i + 1, nil
		}
		if p[i] == '%' {
			i++
			if i == len(p) {
				return 0, &Error{open, "malformed pattern (missing ']')"}
			}
		}
		i++
	}
}

// step counts one matcher step, and every stepsPerCheck steps unwinds the
// match if done is closed.
func (m *matcher) step() {
	m.steps++
	if m.steps%stepsPerCheck != 0 || m.done == nil {
		return
	}
	select {
	case <-m.done:
		panic(interrupted{})
	default:
	}
}

// match matches the pattern from p on against src from s on, and returns
// where the match ends, or -1. A single class without a quantifier loops
// here; the rest recurse, since they may have to backtrack.
func (m *matcher) match(s, p int) int {
	m.step()
	pat, src := m.pat, m.src
	for {
		if p == len(pat) {
			return s
		}
		switch pat[p] {
		case '(':
			if p+1 < len(pat) && pat[p+1] == ')' {
				return m.openCapture(s, p+2, capPosition)
			}
			return m.openCapture(s, p+1, capOpen)
		case ')':
			return m.closeCapture(s, p, p+1)
		case '$':
			if p+1 == len(pat) {
				if s == len(src) {
					return s
				}
				return -1
			}
		case '%':
			switch c := pat[p+1]; {
			case c == 'b':
				s = m.balanced(s, pat[p+2], pat[p+3])
				if s < 0 {
					return -1
				}
				p += 4
				continue
			case c == 'f':
				set := p + 2
				end, _ := setEnd(pat, set)
				prev, cur := byte(0), byte(0) // Lua's: '\0' before and after the subject
				if s > 0 {
					prev = src[s-1]
				}
				if s < len(src) {
					cur = src[s]
				}
				if m.inSet(prev, set, end-1) || !m.inSet(cur, set, end-1) {
					return -1
				}
				p = end
				continue
			case c >= '0' && c <= '9':
				s = m.backReference(s, p)
				if s < 0 {
					return -1
				}
				p += 2
				continue
			}
		}
		end, _ := itemEnd(pat, p)
		matched := s < len(src) && m.single(src[s], p, end)
		if end < len(pat) {
			switch pat[end] {
			case '?':
				if matched {
					if e := m.match(s+1, end+1); e >= 0 {
						return e
					}
				}
				p = end + 1
				continue
			case '*':
				return m.longest(s, p, end)
			case '+':
				if !matched {
					return -1
				}
				return m.longest(s+1, p, end)
			case '-':
				return m.shortest(s, p, end)
			}
		}
		if !matched {
			return -1
		}
		s++
		p = end
	}
}

// longest matches as many bytes of the class p[p:end] from s as it can, and
// gives back one at a time until the rest of the pattern (after the
// quantifier at end) matches.
func (m *matcher) longest(s, p, end int) int {
	n := 0
	for s+n < len(m.src) && m.single(m.src[s+n], p, end) {
		n++
	}
	for ; n >= 0; n-- {
		if e := m.match(s+n, end+1); e >= 0 {
			return e
		}
	}
	return -1
}

// shortest matches the rest of the pattern after as few bytes of the class
// p[p:end] from s as it can.
func (m *matcher) shortest(s, p, end int) int {
	for {
		if e := m.match(s, end+1); e >= 0 {
			return e
		}
		if s < len(m.src) && m.single(m.src[s], p, end) {
			s++
			continue
		}
		return -1
	}
}

// openCapture opens capture m.level at s (length capOpen, or capPosition
// for "()") and matches the rest from p.
func (m *matcher) openCapture(s, p, length int) int {
	l := m.level
	m.capStart[l], m.capLen[l] = s, length
	m.level++
	e := m.match(s, p)
	if e < 0 {
		m.level--
	}
	return e
}

// closeCapture closes the innermost open capture (at ')' in pattern byte at)
// at s and matches the rest from p.
func (m *matcher) closeCapture(s, at, p int) int {
	l := m.level - 1
	for l >= 0 && m.capLen[l] != capOpen {
		l--
	}
	if l < 0 { // validate balanced the parentheses; a safety net
		panic(&Error{at, "invalid pattern capture"})
	}
	m.capLen[l] = s - m.capStart[l]
	e := m.match(s, p)
	if e < 0 {
		m.capLen[l] = capOpen
	}
	return e
}

// balanced matches %b with open and close at s: from an open byte to the
// close byte that balances it, or -1.
func (m *matcher) balanced(s int, open, close byte) int {
	src := m.src
	if s >= len(src) || src[s] != open {
		return -1
	}
	depth := 1
	for i := s + 1; i < len(src); i++ {
		switch src[i] {
		case close:
			depth--
			if depth == 0 {
				return i + 1
			}
		case open:
			depth++
		}
	}
	return -1
}

// backReference matches at s the text of the capture that %1-%9 at pattern
// byte p names, which must be closed; nothing matches a position capture.
func (m *matcher) backReference(s, p int) int {
	l := int(m.pat[p+1] - '1')
	if l < 0 || l >= m.level || m.capLen[l] == capOpen {
		panic(&Error{p, fmt.Sprintf("invalid capture index %%%c", m.pat[p+1])})
	}
	if m.capLen[l] == capPosition {
		return -1 // as in Lua, where its length is negative: no text matches it
	}
	captured := m.src[m.capStart[l] : m.capStart[l]+m.capLen[l]]
	if len(m.src)-s < len(captured) || string(m.src[s:s+len(captured)]) != string(captured) {
		return -1
	}
	return s + len(captured)
}

// single reports whether c is in the single-byte class pat[p:end].
func (m *matcher) single(c byte, p, end int) bool {
	switch m.pat[p] {
	case '.':
		return true
	case '%':
		return inClass(c, m.pat[p+1])
	case '[':
		return m.inSet(c, p, end-1)
	}
	return m.pat[p] == c
}

// inSet reports whether c is in the set from '[' at pattern byte p to its
// ']' at close: members are %-escapes, ranges x-y and bytes; '^' first
// complements it.
func (m *matcher) inSet(c byte, p, close int) bool {
	pat := m.pat
	in := true
	p++
	if pat[p] == '^' {
		in = false
		p++
	}
	for ; p < close; p++ {
		switch {
		case pat[p] == '%':
			p++
			if inClass(c, pat[p]) {
				return in
			}
		case p+2 < close && pat[p+1] == '-':
			if pat[p] <= c && c <= pat[p+2] {
				return in
			}
			p += 2
		case pat[p] == c:
			return in
		}
	}
	return !in
}

// inClass reports whether c is in the class %cl: a letter of §5.4.1 (its
// upper case the complement), in the C locale; any other byte stands for
// itself.
func inClass(c, cl byte) bool {
	var in bool
	switch cl | 0x20 {
	case 'a':
		in = isAlpha(c)
	case 'c':
		in = c < 0x20 || c == 0x7f
	case 'd':
		in = isDigit(c)
	case 'l':
		in = 'a' <= c && c <= 'z'
	case 'p':
		in = isPunct(c)
	case 's':
		in = c == ' ' || '\t' <= c && c <= '\r'
	case 'u':
		in = 'A' <= c && c <= 'Z'
	case 'w':
		in = isAlpha(c) || isDigit(c)
	case 'x':
		in = isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f'
	case 'z':
		in = c == 0
	default:
		return cl == c
	}
	if 'A' <= cl && cl <= 'Z' {
		return !in
	}
	return in
}

func isAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isPunct is C's ispunct: printable, neither a letter, a digit nor a space.
func isPunct(c byte) bool { return '!' <= c && c <= '~' && !isAlpha(c) && !isDigit(c) }
