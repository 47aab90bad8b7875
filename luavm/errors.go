package luavm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrNoScript: no script is loaded under that name (never loaded, or unloaded).
	ErrNoScript = errors.New("luavm: no such script")
	// ErrNoFunction: the script defines no global function of that name.
	ErrNoFunction = errors.New("luavm: no such function")
	// ErrPoolExhausted: the script's pool is at its maximum and no VM came back
	// before the caller's deadline.
	ErrPoolExhausted = errors.New("luavm: pool exhausted")
	// ErrTimeout: the call ran past its deadline and was stopped.
	ErrTimeout = errors.New("luavm: timeout")
	// ErrMemoryLimit: the process heap went over Options.HeapLimit while the
	// call was running, and the watchdog stopped it.
	ErrMemoryLimit = errors.New("luavm: memory limit")
	// ErrStringLimit: a call asked string.rep or table.concat for a string
	// over Options.MaxStringSize; it was refused before being built.
	ErrStringLimit = errors.New("luavm: string size limit")
	// ErrClosed: the Manager was closed.
	ErrClosed = errors.New("luavm: manager closed")
)

// CompileError is a syntax or compile error in a script. The previous version
// of the script, if any, keeps running.
type CompileError struct {
	Script string
	Line   int
	Msg    string
}

func (e *CompileError) Error() string {
	if e.Line < 1 { // the parser hit the end of the source
		return fmt.Sprintf("luavm: compile %s: at end of script: %s", e.Script, e.Msg)
	}
	return fmt.Sprintf("luavm: compile %s:%d: %s", e.Script, e.Line, e.Msg)
}

// CallError is a runtime error of a call: error() in the script, a type
// error, a panic in a Go function, a timeout (Err is ErrTimeout), a memory
// limit (Err is ErrMemoryLimit) or a string too long (Err is ErrStringLimit). Line is the script line the error was raised
// at, 0 when unknown.
type CallError struct {
	Script    string
	Func      string
	Line      int
	Msg       string
	Traceback string
	Err       error // cause, for errors.Is: ErrTimeout, ErrMemoryLimit or nil
}

func (e *CallError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("luavm: %s:%d: in function %s: %s", e.Script, e.Line, e.Func, e.Msg)
	}
	return fmt.Sprintf("luavm: %s: in function %s: %s", e.Script, e.Func, e.Msg)
}

func (e *CallError) Unwrap() error { return e.Err }

// splitWhere takes gopher-lua's "<script>:<line>: message" apart. The script
// name may itself contain colons (a path on Windows, a URL), so the line is
// looked for after the known script name first.
func splitWhere(script, msg string) (line int, rest string) {
	if strings.HasPrefix(msg, script+":") {
		tail := msg[len(script)+1:]
		if i := strings.IndexByte(tail, ':'); i > 0 {
			if n, err := strconv.Atoi(tail[:i]); err == nil {
				return n, strings.TrimSpace(tail[i+1:])
			}
		}
	}
	return 0, msg
}
