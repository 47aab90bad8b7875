// Package coldtest starts the real servers and readers the cold-tier tests
// use: versitygw (an S3-compatible server with a POSIX backend, installed
// by scripts/install-s3) on a 127.0.0.1 port it picks, and the Python venv
// with pyiceberg and DuckDB (scripts/install-iceberg-readers), whose
// scripts a PythonPool runs in long-lived interpreters; Iceberg's
// REST catalog server (rest.go), Spark (spark.go) and Trino (trino.go),
// each installed by its scripts/install-* script. Start them once per
// package (TestMain, or SharedSpark and SharedTrino on first use: a JVM
// start costs tens of CPU-seconds); tests call Require, which fails the
// test when something is missing and CI is set, and skips it otherwise.
package coldtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/sluicedb/sluice/internal/testenv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/freeport"
)

// Credentials of the test server's root user; Start exports them as
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY so code under test finds them
// the usual way.
const (
	AccessKey = "sluice-test"
	SecretKey = "sluice-test-secret"
	Bucket    = "warehouse"
	Region    = "us-east-1"
)

// S3 is a running versitygw.
type S3 struct {
	Endpoint string // http://127.0.0.1:port
	Root     string // the POSIX directory behind it (buckets are its subdirectories)
	cmd      *exec.Cmd
}

func cacheDir() string {
	if d := os.Getenv("SLUICE_CACHE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "sluice")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), ".cache", "sluice")
	}
	return filepath.Join(home, ".cache", "sluice")
}

// ErrMissing wraps what is not installed.
var ErrMissing = errors.New("not installed")

// StartS3 starts versitygw on a free 127.0.0.1 port over a POSIX root in
// dir, with the bucket Bucket, and waits until it accepts connections.
func StartS3(dir string) (*S3, error) {
	s, err := StartS3With(dir, S3Options{})
	if err != nil {
		return nil, err
	}
	os.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	os.Setenv("AWS_REGION", Region)
	return s, nil
}

// S3Options are a versitygw's address and root user; zero fields take
// StartS3's: a free 127.0.0.1 port, AccessKey and SecretKey.
type S3Options struct {
	Addr, AccessKey, SecretKey string
}

// StartS3With is StartS3 with options (a test that restarts the server
// on its address, with other credentials), and it leaves the environment
// as it is.
func StartS3With(dir string, o S3Options) (*S3, error) {
	bin := os.Getenv("SLUICE_VERSITYGW")
	if bin == "" {
		bin = filepath.Join(cacheDir(), "bin", "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("versitygw at %s: %w (run scripts/install-s3)", bin, ErrMissing)
	}
	root := filepath.Join(dir, "s3root")
	if err := os.MkdirAll(filepath.Join(root, Bucket), 0o755); err != nil {
		return nil, err
	}
	addr, access, secret := o.Addr, o.AccessKey, o.SecretKey
	if addr == "" {
		port, err := freeport.Port()
		if err != nil {
			return nil, err
		}
		addr = "127.0.0.1:" + strconv.Itoa(port)
	}
	if access == "" {
		access, secret = AccessKey, SecretKey
	}
	cmd := exec.Command(bin, "--port", addr, "--access", access, "--secret", secret, "--region", Region, "posix", root)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	s := &S3{Endpoint: "http://" + addr, Root: root, cmd: cmd}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("versitygw did not listen on %s: %s", addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s, nil
}

// Stop kills the server.
func (s *S3) Stop() {
	if s != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// Python returns the interpreter of the readers' venv (pyiceberg, DuckDB).
func Python() (string, error) {
	py := os.Getenv("SLUICE_ICEBERG_PYTHON")
	if py == "" {
		py = filepath.Join(cacheDir(), "iceberg-venv", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		return "", fmt.Errorf("pyiceberg/duckdb venv at %s: %w (run scripts/install-iceberg-readers)", py, ErrMissing)
	}
	if out, err := exec.Command(py, "-c", "import pyiceberg, duckdb, pyarrow").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s cannot import pyiceberg, duckdb, pyarrow: %w: %s (run scripts/install-iceberg-readers)", py, ErrMissing, out)
	}
	return py, nil
}

// RunPython runs a script with the readers' interpreter and returns its
// standard output.
func RunPython(ctx context.Context, py, script string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, py, append([]string{"-c", script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("python: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Require fails t when err is not nil and CI is set, and skips it
// otherwise.
func Require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	testenv.Missing(t, "%v", err)
}
