package testkafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/sluicedb/sluice/internal/testenv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicedb/sluice/internal/freeport"
)

// ErrNotInstalled is returned by Start when the Kafka jars are missing.
var ErrNotInstalled = errors.New("testkafka: Kafka is not installed (scripts/test installs it; or run scripts/install-kafka)")

// Broker is a running broker process.
type Broker struct {
	// Addr is the client listener, 127.0.0.1:port.
	Addr string
	// Secure is the SASL_SSL listener of a broker started with
	// Options.Secure; nil otherwise.
	Secure *Secured
	dir    string
	cp     string
	cmd    *exec.Cmd
	log    *os.File
	done   chan struct{}
}

// CacheDir is where scripts/install-kafka installs (the same rule as the
// script: $SLUICE_CACHE_DIR, else $XDG_CACHE_HOME/sluice, else ~/.cache/sluice).
func CacheDir() string {
	if d := os.Getenv("SLUICE_CACHE_DIR"); d != "" {
		return filepath.Join(d, "kafka-4.1.0")
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "/tmp"
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "sluice", "kafka-4.1.0")
}

// Classpath returns the broker's Java classpath. It never installs: a
// test that downloaded Kafka would hide a missing install step and take
// minutes where the suite expects seconds. scripts/test installs it
// (scripts/install-kafka) before the tests run.
func Classpath() (string, error) {
	cpFile := filepath.Join(CacheDir(), "classpath.txt")
	if _, err := os.Stat(filepath.Join(CacheDir(), ".installed")); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	b, err := os.ReadFile(cpFile)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	if _, err := exec.LookPath("java"); err != nil {
		return "", fmt.Errorf("%w: java: %v", ErrNotInstalled, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Options are how StartWith starts a broker.
type Options struct {
	// Partitions is the topics' default partition count (default 1).
	Partitions int
	// Secure adds a SASL_SSL listener (Broker.Secure) beside the
	// plaintext one, with certificates and users made for the test.
	Secure bool
	// Port is the plaintext listener's port on 127.0.0.1 (0: a free
	// one). A broker a person starts by hand (examples/cluster/local)
	// listens where the example configs look for it.
	Port int
}

// Start formats a fresh KRaft log directory under dir and starts a broker
// on free 127.0.0.1 ports, waiting until it accepts connections (about
// 10-25 s on a 2-core machine). Topics are created with `partitions`
// partitions by default.
func Start(ctx context.Context, dir string, partitions int) (*Broker, error) {
	return StartWith(ctx, dir, Options{Partitions: partitions})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, dir string, o Options) (*Broker, error) {
	partitions := max(o.Partitions, 1)
	cp, err := Classpath()
	if err != nil {
		return nil, err
	}
	port := o.Port
	if port == 0 {
		if port, err = freeport.Port(); err != nil {
			return nil, err
		}
	}
	cport, err := freeport.Port()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	b := &Broker{Addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, cp: cp}
	listeners := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", port)
	protocols := "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
	var extraProps string
	var formatArgs []string
	if o.Secure {
		sport, err := freeport.Port()
		if err != nil {
			return nil, err
		}
		sec, brokerPEM, err := writeCerts(dir)
		if err != nil {
			return nil, err
		}
		sec.Addr = fmt.Sprintf("127.0.0.1:%d", sport)
		b.Secure = sec
		listeners += ",SASL_SSL://" + sec.Addr
		protocols += ",SASL_SSL:SASL_SSL"
		// The controller and the broker talk over the plaintext listeners.
		extraProps = "inter.broker.listener.name=PLAINTEXT\n" + secureProps(brokerPEM, sec.CAFile)
		formatArgs = scramArgs()
	}
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
listeners=%s,CONTROLLER://127.0.0.1:%d
advertised.listeners=%s
controller.listener.names=CONTROLLER
listener.security.protocol.map=%s
controller.quorum.bootstrap.servers=127.0.0.1:%d
log.dirs=%s
num.partitions=%d
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.flush.interval.messages=9223372036854775807
`, listeners, cport, listeners, protocols, cport, filepath.Join(dir, "data"), partitions) + extraProps
	propsPath := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(propsPath, []byte(props), 0o644); err != nil {
		return nil, err
	}
	clusterID, err := randomClusterID()
	if err != nil {
		return nil, err
	}
	// The storage tool is a JVM run once: the JIT flags of the broker's
	// own start cut its start-up CPU.
	format := append([]string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp, "kafka.tools.StorageTool", "format", "-t", clusterID, "-c", propsPath, "--standalone"}, formatArgs...)
	if out, err := exec.CommandContext(ctx, "java", format...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("testkafka: format storage: %w: %s", err, out)
	}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Broker) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(b.dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("java", "-Xmx512m", "-Xms256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.level=WARN", "-cp", b.cp, "kafka.Kafka", filepath.Join(b.dir, "server.properties"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("testkafka: start broker: %w", err)
	}
	b.cmd, b.log, b.done = cmd, logf, make(chan struct{})
	go func() { cmd.Wait(); close(b.done) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.Addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-b.done:
			return fmt.Errorf("testkafka: broker exited before listening: %s", b.tail())
		case <-ctx.Done():
			b.Stop()
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Stop()
			return fmt.Errorf("testkafka: broker did not listen on %s in 90s: %s", b.Addr, b.tail())
		}
	}
}

func (b *Broker) tail() string {
	data, _ := os.ReadFile(filepath.Join(b.dir, "broker.log"))
	if i := len(data) - 2000; i > 0 {
		data = data[i:]
	}
	return string(bytes.TrimSpace(data))
}

// Kill stops the broker with SIGKILL (a crash) and waits for it to exit.
func (b *Broker) Kill() {
	if b.cmd == nil {
		return
	}
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	<-b.done
	b.log.Close()
	b.cmd = nil
}

// Restart starts the broker again on the same ports and log directory
// after Kill or Stop.
func (b *Broker) Restart(ctx context.Context) error {
	if b.cmd != nil {
		return errors.New("testkafka: broker is running")
	}
	return b.start(ctx)
}

// Stop shuts the broker down (SIGTERM, then SIGKILL after 20 s).
func (b *Broker) Stop() {
	if b.cmd == nil {
		return
	}
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(20 * time.Second):
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
	b.log.Close()
	b.cmd = nil
}

// shared is the package's broker, which Main prepares and the first
// Require starts.
var shared struct {
	once sync.Once
	dir  string // set by Main
	opts Options
	b    *Broker
	err  error
}

// Main prepares one broker for a test package (under a temporary directory,
// topics of `partitions` partitions by default), runs the tests and stops
// it: call it from TestMain. The broker starts when a test first asks for
// it (Require), so that a run of the package's tests that need none (a
// -run of a few, as scripts/test's memory-bound phase makes) starts no JVM.
// When the broker cannot start, tests that call Require fail (CI set) or
// skip (CI unset).
func Main(m interface{ Run() int }, partitions int) int {
	return MainWith(m, Options{Partitions: partitions})
}

// MainWith is Main with options: Options.Secure gives the package's broker
// a SASL_SSL listener too (Broker.Secure), at the cost of a few
// certificates made at start.
func MainWith(m interface{ Run() int }, o Options) int {
	dir, err := os.MkdirTemp("", "testkafka-")
	if err != nil {
		shared.err = err
		return m.Run()
	}
	defer os.RemoveAll(dir)
	shared.dir, shared.opts = dir, o
	code := m.Run()
	// Every test has returned: no Require runs beside this read.
	if shared.b != nil {
		shared.b.Kill()
	}
	return code
}

// startShared starts the package's broker, once, for the first Require.
func startShared() {
	if shared.err != nil {
		return
	}
	if shared.dir == "" {
		shared.err = errors.New("testkafka.Main was not called from TestMain")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	shared.b, shared.err = StartWith(ctx, shared.dir, shared.opts)
}

// TB is the part of testing.TB Require uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Require returns the package's broker, started by the first call, failing
// the test when it is missing and CI is set (skipping it otherwise).
func Require(t TB) *Broker {
	t.Helper()
	shared.once.Do(startShared)
	if shared.b != nil {
		return shared.b
	}
	testenv.Missing(t, "a Kafka broker is needed and could not start: %v", shared.err)
	return nil
}

// randomClusterID is what `kafka-storage.sh random-uuid` prints (Kafka's
// Uuid.randomUuid: 16 random bytes in URL-safe base64 without padding,
// never starting with '-', which a command line would take for a flag),
// made here instead of in a JVM of its own: a JVM start is a second or
// more of CPU for each broker a test starts.
func randomClusterID() (string, error) {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("testkafka: cluster id: %w", err)
		}
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id, nil
		}
	}
}
