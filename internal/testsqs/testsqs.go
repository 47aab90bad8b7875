// Package testsqs starts moto's server (scripts/install-moto) as a real
// SQS-compatible server for tests: on a 127.0.0.1 port it picks, stopped
// at the test's end.
package testsqs

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/testenv"
)

// ErrMissing wraps a moto_server that is not installed.
var ErrMissing = errors.New("not installed")

// Server is a running moto_server.
type Server struct {
	Endpoint string // http://127.0.0.1:port
	cmd      *exec.Cmd
}

func binary() string {
	if b := os.Getenv("SLUICE_MOTO_SERVER"); b != "" {
		return b
	}
	dir := os.Getenv("SLUICE_CACHE_DIR")
	if dir == "" {
		if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
			dir = filepath.Join(x, "sluice")
		} else if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".cache", "sluice")
		} else {
			dir = filepath.Join(os.TempDir(), ".cache", "sluice")
		}
	}
	return filepath.Join(dir, "moto-venv", "bin", "moto_server")
}

// Start starts moto_server and waits until it accepts connections.
func Start() (*Server, error) {
	bin := binary()
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("moto_server at %s: %w (run scripts/install-moto)", bin, ErrMissing)
	}
	port, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	s := &Server{Endpoint: "http://" + addr, cmd: cmd}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("moto_server did not listen on %s: %s", addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server.
func (s *Server) Stop() {
	if s != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// StartT starts moto_server for t and stops it at t's end; a missing one
// fails t under CI=true and skips it otherwise.
func StartT(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	testenv.Require(t, err)
	t.Cleanup(s.Stop)
	return s
}
