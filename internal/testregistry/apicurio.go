package testregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/internal/testenv"
)

// ErrNoApicurio: scripts/install-schema-registry has not installed Apicurio
// Registry.
var ErrNoApicurio = errors.New("Apicurio Registry is not installed (scripts/install-schema-registry)")

// apicurioStartTimeout bounds a start: ~6 s on an idle 2-core machine, more
// while other builds load it.
const apicurioStartTimeout = 2 * time.Minute

// ccompatPath is where Apicurio serves Confluent's API (version 7).
const ccompatPath = "/apis/ccompat/v7"

// ApicurioDir is where scripts/install-schema-registry unpacks Apicurio
// Registry (its `run` starts it).
func ApicurioDir() string {
	return filepath.Join(cacheDir(), "apicurio-registry-3.3.3")
}

// Apicurio is a running Apicurio Registry process: a real registry server
// (Quarkus, H2 in memory, so it starts empty), whose Confluent-compatible
// API serializers and sluice's client use as they use Confluent's.
type Apicurio struct {
	// URL is the base URL of its Confluent-compatible API (what a
	// Confluent client takes as the registry's URL).
	URL string
	// Started is how long it took from exec to ready.
	Started time.Duration

	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

// StartApicurio starts Apicurio Registry on two 127.0.0.1 ports it picks
// (the API and the management interface, whose readiness check it waits
// for), logging to a file in logDir. A port taken between the pick and the
// bind makes the process exit: it is retried on new ports.
func StartApicurio(ctx context.Context, logDir string) (*Apicurio, error) {
	run := filepath.Join(ApicurioDir(), "run")
	if _, err := os.Stat(filepath.Join(ApicurioDir(), ".installed")); err != nil {
		return nil, fmt.Errorf("%w: %s has no install stamp", ErrNoApicurio, ApicurioDir())
	}
	var err error
	for range 3 {
		var a *Apicurio
		a, err = startApicurio(ctx, run, logDir)
		if err == nil {
			return a, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func startApicurio(ctx context.Context, run, logDir string) (*Apicurio, error) {
	api, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	mgmt, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	logf, err := os.CreateTemp(logDir, "apicurio-*.log")
	if err != nil {
		return nil, fmt.Errorf("apicurio log: %w", err)
	}
	defer logf.Close()
	a := &Apicurio{
		URL:     fmt.Sprintf("http://127.0.0.1:%d%s", api, ccompatPath),
		logPath: logf.Name(),
		done:    make(chan struct{}),
	}
	a.cmd = exec.Command(run,
		"-Dquarkus.http.host=127.0.0.1", "-Dquarkus.http.port="+strconv.Itoa(api),
		"-Dquarkus.management.host=127.0.0.1", "-Dquarkus.management.port="+strconv.Itoa(mgmt))
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	// A test binary killed by its timeout must not leave a JVM behind.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	begin := time.Now()
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start apicurio (%s): %w", run, err)
	}
	go func() { _ = a.cmd.Wait(); close(a.done) }()

	ctx, cancel := context.WithTimeout(ctx, apicurioStartTimeout)
	defer cancel()
	ready := fmt.Sprintf("http://127.0.0.1:%d/health/ready", mgmt)
	for {
		if healthy(ctx, ready) {
			a.Started = time.Since(begin)
			return a, nil
		}
		select {
		case <-a.done:
			return nil, fmt.Errorf("apicurio exited while starting: %s", a.Log())
		case <-ctx.Done():
			a.Close()
			return nil, fmt.Errorf("apicurio not ready after %v: %w: %s", time.Since(begin).Round(time.Second), ctx.Err(), a.Log())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func healthy(ctx context.Context, url string) bool {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Close kills the registry (its storage is in memory: nothing to flush)
// and waits for it to exit.
func (a *Apicurio) Close() {
	_ = a.cmd.Process.Kill()
	<-a.done
}

// Log is the last 4 KiB of its log.
func (a *Apicurio) Log() string {
	b, _ := os.ReadFile(a.logPath)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// LogSize is the log's length now: Requests counts from such a mark.
func (a *Apicurio) LogSize() int64 {
	fi, err := os.Stat(a.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Requests counts the GET requests of path (under URL, e.g.
// "/schemas/ids/3") that its access log shows after the mark from
// LogSize: how often a client asked, which a cache must keep low.
func (a *Apicurio) Requests(mark int64, path string) int {
	b, _ := os.ReadFile(a.logPath)
	if mark > int64(len(b)) {
		return 0
	}
	want := []byte(`method="GET" path="` + ccompatPath + path)
	n := 0
	for _, line := range bytes.Split(b[mark:], []byte("\n")) {
		i := bytes.Index(line, want)
		if i < 0 {
			continue
		}
		// The path ends there or at its query: /schemas/ids/1 is not /schemas/ids/12.
		if rest := line[i+len(want):]; len(rest) > 0 && (rest[0] == '"' || rest[0] == '?') {
			n++
		}
	}
	return n
}

// SchemaID is the global id of a subject's version as the registry
// answers it (a test frames messages with the id a serializer got).
func (a *Apicurio) SchemaID(ctx context.Context, subject string, version int) (int, error) {
	return schemaID(ctx, a.URL, subject, version)
}

func schemaID(ctx context.Context, base, subject string, version int) (int, error) {
	url := fmt.Sprintf("%s/subjects/%s/versions/%d", base, subject, version)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("schema id of %s version %d: %w", subject, version, err)
	}
	defer resp.Body.Close()
	var v struct{ ID int }
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("schema id of %s version %d: %s", subject, version, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return 0, fmt.Errorf("schema id of %s version %d: %w", subject, version, err)
	}
	return v.ID, nil
}

// SharedApicurio is one Apicurio for a test package, started on first use
// (a JVM start costs seconds, so tests share it; subjects are per topic,
// and topics per test). The package's TestMain calls Close.
type SharedApicurio struct {
	once sync.Once
	a    *Apicurio
	err  error
	dir  string
}

// Require returns the package's registry, starting it on first use; a
// missing install fails t under CI and skips it elsewhere, a registry
// that does not start fails it. When t fails, the registry's log tail is
// in its output.
func (s *SharedApicurio) Require(t testing.TB) *Apicurio {
	t.Helper()
	s.once.Do(func() {
		s.dir, s.err = os.MkdirTemp("", "apicurio-")
		if s.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), apicurioStartTimeout)
		defer cancel()
		s.a, s.err = StartApicurio(ctx, s.dir)
	})
	if errors.Is(s.err, ErrNoApicurio) {
		testenv.Require(t, s.err)
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Logf("Apicurio Registry at %s (started in %v)", s.a.URL, s.a.Started.Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Apicurio Registry's log (tail):\n%s", s.a.Log())
		}
	})
	return s.a
}

// Close stops the registry if it was started.
func (s *SharedApicurio) Close() {
	if s.a != nil {
		s.a.Close()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}
