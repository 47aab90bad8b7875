package coldtest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/freeport"
)

// REST is a running Iceberg REST catalog: Apache Iceberg's RESTCatalogServer
// test fixture (a JdbcCatalog on in-memory SQLite behind Jetty, files through
// Hadoop's local file system), resolved from Maven Central by
// scripts/install-iceberg-rest. It binds every interface on its port (the
// fixture has no host setting); tests talk to it on 127.0.0.1.
type REST struct {
	URI string
	Log string // its output
	cmd *exec.Cmd
}

// StartREST starts the REST catalog on a free port with its warehouse in
// dir, and waits until it answers. env adds catalog properties the
// fixture's way (CATALOG_IO__IMPL=... sets io-impl, CATALOG_S3_ENDPOINT=...
// sets s3.endpoint): the server writes each commit's metadata file itself,
// so a warehouse on S3 needs its S3FileIO settings.
func StartREST(dir string, env ...string) (*REST, error) {
	return StartRESTOn(0, dir, env...)
}

// StartRESTOn is StartREST on the given port (0: a free one): a catalog a
// person starts by hand (examples/cluster/local) listens where the
// walkthrough's configs look for it.
func StartRESTOn(port int, dir string, env ...string) (*REST, error) {
	cpFile := filepath.Join(cacheDir(), "iceberg-rest", "classpath.txt")
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		return nil, fmt.Errorf("REST catalog classpath %s: %w (run scripts/install-iceberg-rest)", cpFile, ErrMissing)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java: %w", ErrMissing)
	}
	if port == 0 {
		if port, err = freeport.Port(); err != nil {
			return nil, err
		}
	}
	// A test fixture answering a few requests: the C1 compiler alone and
	// the serial collector cut the JVM's start-up CPU (C2 compiling
	// Jetty's and Jackson's start-up paths, parallel GC threads) that it
	// would not win back in a test's life.
	cmd := exec.Command(java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-cp", strings.TrimSpace(string(cp)), "org.apache.iceberg.rest.RESTCatalogServer")
	cmd.Env = append(os.Environ(), "CATALOG_WAREHOUSE="+filepath.Join(dir, "rest-warehouse"), "CATALOG_REST_PORT="+strconv.Itoa(port))
	cmd.Env = append(cmd.Env, env...)
	logPath := filepath.Join(dir, "rest-catalog.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the REST catalog: %w", err)
	}
	r := &REST{URI: "http://127.0.0.1:" + strconv.Itoa(port), Log: logPath, cmd: cmd}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(r.URI + "/v1/config")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r, nil
			}
		}
		if time.Now().After(deadline) {
			r.Stop()
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("the REST catalog did not answer on %s: %s", r.URI, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop kills the catalog server.
func (r *REST) Stop() {
	if r != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}
