package cli

import (
	"bytes"
	"io"
)

// Standard streams an output flag can name.
const (
	notStdStream = iota
	stdoutStream
	stderrStream
)

// stdStream tells whether path names this process's own stdout or stderr:
// "-", /dev/stdout, /dev/fd/1 and /proc/self/fd/1 are stdout; /dev/stderr,
// /dev/fd/2 and /proc/self/fd/2 stderr. Such outputs are written through
// the process's stream, not opened again by path: reopening /dev/stderr
// when the shell sent stderr to a file (2>file) opens that file a second
// time with an offset of its own, so what the process then wrote on stderr
// (the summary) overwrote what went through the second opening (the dead
// letters), and truncating on open would wipe what was written before.
func stdStream(path string) int {
	switch path {
	case "-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1":
		return stdoutStream
	case "/dev/stderr", "/dev/fd/2", "/proc/self/fd/2":
		return stderrStream
	}
	return notStdStream
}

// lineWriter passes on whole lines only, each run of them in one Write, and
// keeps a trailing partial line until more comes or Flush. An output that
// shares a stream with another (dead letters on stderr beside the log and the
// summary, or on stdout beside the rows) goes through one, so that the
// other's lines land between its lines, never inside one (bufio flushes at
// buffer boundaries, mid-line).
type lineWriter struct {
	w       io.Writer
	partial []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	end := bytes.LastIndexByte(p, '\n')
	if end < 0 {
		l.partial = append(l.partial, p...)
		return len(p), nil
	}
	lines := p[:end+1]
	if len(l.partial) > 0 {
		lines = append(l.partial, lines...)
	}
	if _, err := l.w.Write(lines); err != nil {
		return 0, err
	}
	l.partial = append(l.partial[:0], p[end+1:]...)
	return len(p), nil
}

// Flush writes a trailing partial line, if any.
func (l *lineWriter) Flush() error {
	if len(l.partial) == 0 {
		return nil
	}
	_, err := l.w.Write(l.partial)
	l.partial = l.partial[:0]
	return err
}
