package rdbtool

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
	"time"
)

// redisServer is a redis-server child process bound to 127.0.0.1 on a port we
// picked, with its data directory in dir. It is used to make real RDB files
// (the benchmark corpus, test inputs) and to ask the server what it holds.
type redisServer struct {
	cmd  *exec.Cmd
	dir  string
	addr string
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	done chan error // receives cmd.Wait's result once
}

// startRedis starts binary (default "redis-server" from PATH) with persistence
// off, so nothing is written until we ask with SAVE.
func startRedis(ctx context.Context, binary, dir string) (*redisServer, error) {
	if binary == "" {
		binary = "redis-server"
	}
	path, err := exec.LookPath(binary)
	if err != nil {
		return nil, fmt.Errorf("rdbtool: redis-server not found (install it, e.g. apt-get install redis-server): %w", err)
	}
	var lastErr error
	// A picked free port can be taken by someone else before redis binds it:
	// try a few times.
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("rdbtool: pick a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tryStartRedis(ctx context.Context, path, dir string, port int) (*redisServer, error) {
	cmd := exec.Command(path,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--dir", dir, "--dbfilename", "dump.rdb",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--protected-mode", "yes", "--databases", "16",
		"--logfile", filepath.Join(dir, "redis.log"))
	cmd.Stdout = nil
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rdbtool: start %s: %w", path, err)
	}
	s := &redisServer{cmd: cmd, dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan error, 1)}
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
			return nil, fmt.Errorf("rdbtool: redis-server exited (%v): %s", werr, lastLines(log, 5))
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("rdbtool: redis-server on %s did not answer within 10s", s.addr)
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
func (s *redisServer) Close() error {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		return errors.New("rdbtool: redis-server did not exit")
	}
	return nil
}

// Save runs SAVE and returns the path of the RDB file the server wrote.
func (s *redisServer) Save() (string, error) {
	if _, err := s.Do("SAVE"); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, "dump.rdb"), nil
}

// Do sends one command and reads its reply: string ([]byte), int64, nil,
// []any, or an error for a RESP error reply.
func (s *redisServer) Do(args ...string) (any, error) {
	writeCommand(s.w, args...)
	if err := s.w.Flush(); err != nil {
		return nil, err
	}
	return readReply(s.r)
}

// writeCommand appends one RESP array-of-bulk-strings command to w.
func writeCommand(w *bufio.Writer, args ...string) {
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

// replyError is a RESP error reply ("-ERR ...").
type replyError string

func (e replyError) Error() string { return "redis: " + string(e) }

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("rdbtool: read reply: %w", err)
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("rdbtool: malformed reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return []byte(string(body)), nil
	case '-':
		return nil, replyError(string(body))
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
			out[i], err = readReply(r)
			if err != nil {
				var re replyError
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
	return nil, fmt.Errorf("rdbtool: unexpected reply type %q", line[0])
}
