package luajit

import (
	"errors"
	"fmt"
	"strings"
)

// checkName is the local every rewritten chunk binds to the host's check
// function; user code may not use the name (it could rebind it).
const checkName = "__sluice_check__"

// errReserved: the script uses the name the rewriter reserves.
var errReserved = errors.New("the name " + checkName + " is reserved")

// instrument returns src with a call of the host's check function added at
// every place a script can run for long without returning: after each `do`
// (while and for bodies, do blocks), after `repeat`, after the parameter
// list of each function (recursion) and after each goto label (loops made
// of goto). Compiled traces do not call LuaJIT's hooks, so the check is what
// makes a runaway loop stop inside a trace: it compiles into a volatile load
// and a guard. Nothing is added on a new line, so line numbers in errors
// stay those of the user's source.
func instrument(src string) (string, error) {
	const call = " " + checkName + "();"
	var out strings.Builder
	out.Grow(len(src) + 256)
	s := src
	i := 0
	if strings.HasPrefix(s, "#") {
		// LuaJIT skips a first line starting with # (a shebang): the
		// binding goes at the start of the second line
		nl := strings.IndexByte(s, '\n')
		if nl < 0 {
			return s, nil
		}
		i = nl + 1
		out.WriteString(s[:i])
	}
	out.WriteString("local " + checkName + " = ...; ")
	last := i
	inFunc := false // after `function`, waiting for the parameter list's ')
	emit := func(at int) {
		out.WriteString(s[last:at])
		out.WriteString(call)
		last = at
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '-' && strings.HasPrefix(s[i:], "--"):
			i += 2
			if lvl, ok := longBracket(s[i:]); ok {
				end, err := skipLong(s, i, lvl)
				if err != nil {
					return "", err
				}
				i = end
				continue
			}
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				} else if s[j] == '\n' {
					break // unfinished string: let the compiler report it
				}
				j++
			}
			i = j + 1
		case c == '[':
			if lvl, ok := longBracket(s[i:]); ok {
				end, err := skipLong(s, i, lvl)
				if err != nil {
					return "", err
				}
				i = end
				continue
			}
			i++
		case isNameStart(c):
			j := i
			for j < len(s) && isNameChar(s[j]) {
				j++
			}
			word := s[i:j]
			switch word {
			case checkName:
				return "", fmt.Errorf("line %d: %w", 1+strings.Count(s[:i], "\n"), errReserved)
			case "do", "repeat":
				emit(j)
			case "function":
				inFunc = true
			}
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i + 1
			for j < len(s) && (isNameChar(s[j]) || s[j] == '.' ||
				(s[j] == '+' || s[j] == '-') && strings.ContainsRune("eEpP", rune(s[j-1]))) {
				j++
			}
			i = j
		case c == ')':
			i++
			if inFunc {
				inFunc = false
				emit(i)
			}
		case c == ':' && strings.HasPrefix(s[i:], "::"):
			// ::label:: — add the check after the closing ::
			j := i + 2
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			k := j
			for k < len(s) && isNameChar(s[k]) {
				k++
			}
			for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
				k++
			}
			if k > j && strings.HasPrefix(s[k:], "::") {
				i = k + 2
				// A `;` right after the label belongs to the label
				// statement in gopher-lua's grammar (Lua 5.1 has no empty
				// statement): the check goes after it ("::a::; f();", not
				// "::a:: f();;").
				if m := len(s[i:]) - len(strings.TrimLeft(s[i:], " \t")); strings.HasPrefix(s[i+m:], ";") {
					i += m + 1
				}
				emit(i)
			} else {
				i += 2
			}
		default:
			i++
		}
	}
	out.WriteString(s[last:])
	return out.String(), nil
}

// longBracket reports whether s starts a long bracket [[ or [==[, and its level.
func longBracket(s string) (int, bool) {
	if len(s) < 2 || s[0] != '[' {
		return 0, false
	}
	j := 1
	for j < len(s) && s[j] == '=' {
		j++
	}
	if j < len(s) && s[j] == '[' {
		return j - 1, true
	}
	return 0, false
}

// skipLong returns the index after the long bracket starting at i.
func skipLong(s string, i, level int) (int, error) {
	closing := "]" + strings.Repeat("=", level) + "]"
	k := strings.Index(s[i+level+2:], closing)
	if k < 0 {
		return len(s), nil // unfinished: the compiler reports it
	}
	return i + level + 2 + k + len(closing), nil
}

// isNameStart follows LuaJIT's lexer (and gopher-lua's), for which every
// byte from 0x80 up is a letter: "do\xf3" is one name, not the keyword do.
func isNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isNameChar(c byte) bool { return isNameStart(c) || c >= '0' && c <= '9' }
