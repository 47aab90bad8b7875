package coldtest

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Spark is Apache Spark 3.5 as a library (Maven Central jars with Iceberg's
// Spark runtime, iceberg-aws-bundle and the SQLite JDBC driver), resolved by
// scripts/install-spark; a test package runs it as one local JVM (Server).
type Spark struct {
	Java      string
	Classpath string
}

// FindSpark finds java, javac (the driver runs as a Java source file) and
// the classpath scripts/install-spark wrote.
func FindSpark() (*Spark, error) {
	cpFile := filepath.Join(cacheDir(), "spark", "classpath.txt")
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		return nil, fmt.Errorf("Spark classpath %s: %w (run scripts/install-spark)", cpFile, ErrMissing)
	}
	for _, jar := range strings.Split(strings.TrimSpace(string(cp)), ":") {
		if _, err := os.Stat(jar); err != nil {
			return nil, fmt.Errorf("Spark jar %s: %w (run scripts/install-spark)", jar, ErrMissing)
		}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java: %w (run scripts/install-spark)", ErrMissing)
	}
	if _, err := exec.LookPath("javac"); err != nil {
		return nil, fmt.Errorf("javac (a JDK, for the Spark test's driver): %w (run scripts/install-spark)", ErrMissing)
	}
	return &Spark{Java: java, Classpath: strings.TrimSpace(string(cp))}, nil
}

// sparkJavaOptions are what spark-submit's launcher adds on Java 17
// (Spark's JavaModuleOptions): Spark reaches into JDK internals.
var sparkJavaOptions = []string{
	"-XX:+IgnoreUnrecognizedVMOptions",
	"--add-opens=java.base/java.lang=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens=java.base/java.io=ALL-UNNAMED",
	"--add-opens=java.base/java.net=ALL-UNNAMED",
	"--add-opens=java.base/java.nio=ALL-UNNAMED",
	"--add-opens=java.base/java.util=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
	"--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
	"--add-opens=java.base/sun.security.action=ALL-UNNAMED",
	"--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
	"-Djdk.reflect.useDirectMethodHandle=false",
	"-Dio.netty.tryReflectionSetAccessible=true",
}

// sparkServerSource is the driver of a SparkServer.
//
//go:embed SparkServer.java
var sparkServerSource []byte

// ErrSparkStatement wraps a statement's failure in a SparkServer (the
// server goes on serving), as against a failure of its JVM.
var ErrSparkStatement = errors.New("spark statement failed")

// A SparkServer is one Spark JVM (SparkServer.java) that runs many
// requests, each in a new session of its own: a Spark start costs tens of
// CPU-seconds, more than the queries a test asks of it, and a package's
// tests ask several. It starts on the first Run, and again after a Run
// whose context ended killed it. Requests run one at a time.
type SparkServer struct {
	spark *Spark
	mu    sync.Mutex
	proc  *sparkProc
	dir   string
}

type sparkProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Reader
	stderr *tailBuffer
}

// Server returns a SparkServer of s's install; it starts on its first Run.
func (s *Spark) Server() *SparkServer { return &SparkServer{spark: s} }

// Run runs statements in a new session with the settings of the Spark
// properties file conf (spark-defaults.conf form: "key value" a line) and
// returns its SPARKQ line of each statement (SparkServer.java). A failed statement ends the request with an error wrapping
// ErrSparkStatement; when ctx ends first, the JVM is killed.
func (ss *SparkServer) Run(ctx context.Context, conf string, statements ...string) ([]byte, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.proc == nil {
		p, err := ss.start(ctx)
		if err != nil {
			return nil, err
		}
		ss.proc = p
	}
	p := ss.proc
	abs, err := filepath.Abs(conf)
	if err != nil {
		return nil, err
	}
	req, err := json.Marshal(struct {
		Conf       string   `json:"conf"`
		Statements []string `json:"statements"`
	}{abs, statements})
	if err != nil {
		return nil, err
	}
	type result struct {
		out     []byte
		failure string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		if _, err := p.stdin.Write(append(req, '\n')); err != nil {
			done <- result{err: fmt.Errorf("send request: %w", err)}
			return
		}
		var out []byte
		for {
			line, err := p.lines.ReadString('\n')
			if err != nil {
				done <- result{err: fmt.Errorf("read reply: %w", err)}
				return
			}
			switch {
			case line == "SPARKEND\n":
				done <- result{out: out}
				return
			case strings.HasPrefix(line, "SPARKERR "):
				var msg string
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "SPARKERR ")), &msg); err != nil {
					msg = line
				}
				// The SPARKEND that follows is read by the next request's
				// loop only if left: read it here.
				if _, err := p.lines.ReadString('\n'); err != nil {
					done <- result{err: fmt.Errorf("read reply: %w", err)}
					return
				}
				done <- result{out: out, failure: msg}
				return
			case strings.HasPrefix(line, "SPARKQ "):
				out = append(out, line...)
			}
		}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			p.kill()
			ss.proc = nil
			return r.out, fmt.Errorf("spark server: %w: %s", r.err, p.stderr.String())
		}
		if r.failure != "" {
			return r.out, fmt.Errorf("%w: %s", ErrSparkStatement, r.failure)
		}
		return r.out, nil
	case <-ctx.Done():
		p.kill()
		<-done
		ss.proc = nil
		return nil, fmt.Errorf("spark server: %w: %s", ctx.Err(), p.stderr.String())
	}
}

// start starts the JVM and waits for its SPARKREADY line (the session
// built), for at most sparkStartTimeout or until ctx ends; a start that
// fails leaves nothing running.
func (ss *SparkServer) start(ctx context.Context) (*sparkProc, error) {
	if ss.dir == "" {
		dir, err := os.MkdirTemp("", "spark-server-")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "SparkServer.java"), sparkServerSource, 0o644); err != nil {
			return nil, err
		}
		ss.dir = dir
	}
	args := append([]string{"-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}, sparkJavaOptions...)
	args = append(args, "-cp", ss.spark.Classpath, filepath.Join(ss.dir, "SparkServer.java"), filepath.Join(ss.dir, "warehouse"))
	cmd := exec.Command(ss.spark.Java, args...)
	// A test binary killed by its timeout must not leave a JVM behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	tail := &tailBuffer{max: 6000}
	cmd.Stderr = tail
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the Spark server: %w", err)
	}
	p := &sparkProc{cmd: cmd, stdin: stdin, lines: bufio.NewReaderSize(stdout, 1<<20), stderr: tail}
	ready := make(chan error, 1)
	go func() {
		for {
			line, err := p.lines.ReadString('\n')
			if err != nil {
				ready <- err
				return
			}
			if line == "SPARKREADY\n" {
				ready <- nil
				return
			}
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			p.kill()
			return nil, fmt.Errorf("the Spark server did not start: %w: %s", err, tail.String())
		}
	case <-time.After(sparkStartTimeout):
		p.kill()
		<-ready
		return nil, fmt.Errorf("the Spark server did not start in %v: %s", sparkStartTimeout, tail.String())
	case <-ctx.Done():
		p.kill()
		<-ready
		return nil, fmt.Errorf("the Spark server's start: %w: %s", ctx.Err(), tail.String())
	}
	return p, nil
}

// sparkStartTimeout bounds a Spark server's start (a JVM compiling its
// driver and building a session: ~20 s on an idle machine, minutes at
// load 30).
const sparkStartTimeout = 5 * time.Minute

func (p *sparkProc) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
	p.stdin.Close()
	p.cmd.Wait()
}

// Close stops the JVM and removes the driver's directory.
func (ss *SparkServer) Close() {
	if ss == nil {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.proc != nil {
		ss.proc.kill()
		ss.proc = nil
	}
	if ss.dir != "" {
		os.RemoveAll(ss.dir)
	}
}

// SharedSpark is one SparkServer for a test package, found on first use;
// the package's TestMain calls Close.
type SharedSpark struct {
	once sync.Once
	srv  *SparkServer
	err  error
}

// Require returns the package's Spark server (its JVM starts on its first
// Run); a missing install fails t under CI and skips it elsewhere.
func (s *SharedSpark) Require(t testing.TB) *SparkServer {
	t.Helper()
	s.once.Do(func() {
		var spark *Spark
		if spark, s.err = FindSpark(); s.err == nil {
			s.srv = spark.Server()
		}
	})
	Require(t, s.err)
	return s.srv
}

// Close stops the server if it was started.
func (s *SharedSpark) Close() { s.srv.Close() }
