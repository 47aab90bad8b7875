// Package redisproc runs a real redis-server as a child process bound to
// 127.0.0.1 on a port it picks, and talks RESP2 to it: the RDB benchmark
// corpus generator and the tests that compare an export with what the server
// holds use it. It is test and benchmark tooling, not part of the product.
package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/freeport"
)

// Server is a redis-server child process bound to 127.0.0.1 on a port we
// picked, with its data directory in dir. It is used to make real RDB files
// (the benchmark corpus, test inputs) and to ask the server what it holds.
type Server struct {
	cmd  *exec.Cmd
	dir  string
	addr string
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	done chan error // receives cmd.Wait's result once
}

// Start starts binary (default "redis-server" from PATH) with persistence
// off, so nothing is written until we ask with SAVE.
func Start(ctx context.Context, binary, dir string) (*Server, error) {
	if binary == "" {
		binary = "redis-server"
	}
	path, err := exec.LookPath(binary)
	if err != nil {
		return nil, fmt.Errorf("redisproc: redis-server not found (install it, e.g. apt-get install redis-server): %w", err)
	}
	var lastErr error
	// A picked free port can be taken by someone else before redis binds it:
	// try a few times.
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freeport.Port()
		if err != nil {
			return nil, err
		}
		s, err := tryStartRedis(ctx, path, dir, port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func tryStartRedis(ctx context.Context, path, dir string, port int) (*Server, error) {
	cmd := exec.Command(path,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--dir", dir, "--dbfilename", "dump.rdb",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--protected-mode", "yes", "--databases", "16",
		"--logfile", filepath.Join(dir, "redis.log"))
	cmd.Stdout = nil
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redisproc: start %s: %w", path, err)
	}
	s := &Server{cmd: cmd, dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			s.conn = conn
			s.r = bufio.NewReaderSize(conn, 64<<10)
			s.w = bufio.NewWriterSize(conn, 64<<10)
			if _, err := s.Do("PING"); err == nil {
				return s, nil
			}
			conn.Close()
		}
		select {
		case werr := <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return nil, fmt.Errorf("redisproc: redis-server exited (%v): %s", werr, lastLines(log, 5))
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("redisproc: redis-server on %s did not answer within 10s", s.addr)
		}
	}
}

func lastLines(b []byte, n int) string {
	end := len(b)
	for i := len(b) - 1; i >= 0 && n >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n < 0 {
				return string(b[i+1 : end])
			}
		}
	}
	return string(b[:end])
}

// Close stops the server without saving and waits for it to exit.
func (s *Server) Close() error {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		return errors.New("redisproc: redis-server did not exit")
	}
	return nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Dir is the server's data directory.
func (s *Server) Dir() string { return s.dir }

// Pipeline runs fill, which writes any number of commands, while a second
// goroutine reads the replies, so neither side waits for the other. The
// first error reply is returned (with the count of error replies).
func (s *Server) Pipeline(ctx context.Context, fill func(w *bufio.Writer) error) error {
	const endMarker = "__sluice_pipeline_end__"
	var (
		wg       sync.WaitGroup
		readErr  error
		firstErr error
		nErrors  int
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			v, err := ReadReply(s.r)
			var re ReplyError
			if errors.As(err, &re) {
				nErrors++
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			if err != nil {
				readErr = err
				return
			}
			if b, ok := v.([]byte); ok && string(b) == endMarker {
				return
			}
		}
	}()
	// Unblock the reader if the context ends mid-way.
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer stop()
	fillErr := fill(s.w)
	WriteCommand(s.w, "ECHO", endMarker)
	flushErr := s.w.Flush()
	wg.Wait()
	switch {
	case fillErr != nil:
		return fillErr
	case flushErr != nil:
		return fmt.Errorf("redisproc: pipeline write: %w", flushErr)
	case readErr != nil:
		return readErr
	case firstErr != nil:
		return fmt.Errorf("redisproc: %d commands failed, first: %w", nErrors, firstErr)
	}
	return nil
}

// Save runs SAVE and returns the path of the RDB file the server wrote.
func (s *Server) Save() (string, error) {
	if _, err := s.Do("SAVE"); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, "dump.rdb"), nil
}

// Do sends one command and reads its reply: string ([]byte), int64, nil,
// []any, or an error for a RESP error reply.
func (s *Server) Do(args ...string) (any, error) {
	WriteCommand(s.w, args...)
	if err := s.w.Flush(); err != nil {
		return nil, err
	}
	return ReadReply(s.r)
}

// WriteCommand appends one RESP array-of-bulk-strings command to w.
func WriteCommand(w *bufio.Writer, args ...string) {
	var num [20]byte
	w.WriteByte('*')
	w.Write(strconv.AppendInt(num[:0], int64(len(args)), 10))
	w.WriteString("\r\n")
	for _, a := range args {
		w.WriteByte('$')
		w.Write(strconv.AppendInt(num[:0], int64(len(a)), 10))
		w.WriteString("\r\n")
		w.WriteString(a)
		w.WriteString("\r\n")
	}
}

// ReplyError is a RESP error reply ("-ERR ...").
type ReplyError string

func (e ReplyError) Error() string { return "redis: " + string(e) }

// ReadReply reads one RESP2 reply.
func ReadReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("redisproc: read reply: %w", err)
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("redisproc: malformed reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return []byte(string(body)), nil
	case '-':
		return nil, ReplyError(string(body))
	case ':':
		return strconv.ParseInt(string(body), 10, 64)
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return buf[:n], nil
	case '*':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		var firstErr error
		for i := range out {
			out[i], err = ReadReply(r)
			if err != nil {
				var re ReplyError
				if !errors.As(err, &re) {
					return nil, err
				}
				if firstErr == nil {
					firstErr = err
				}
			}
		}
		return out, firstErr
	}
	return nil, fmt.Errorf("redisproc: unexpected reply type %q", line[0])
}
