// Package pgtest runs a real PostgreSQL server for tests: initdb into a
// temporary directory, postgres on a free 127.0.0.1 port with its unix
// socket in that directory, a login role with a password (TCP connections
// authenticate with SCRAM, as a production server would ask), and a fresh
// database per test. Start one server per package in TestMain (or lazily,
// once) and Stop it at the end.
//
// PostgreSQL refuses to run as root; when the tests run as root the server
// runs as the "postgres" system user (the Debian package creates it;
// SLUICE_PG_USER names another), with the temporary directory given to it.
// The binaries are found through SLUICE_PG_BINDIR, then PATH, then
// /usr/lib/postgresql/<version>/bin (Debian's layout, newest first);
// scripts/install-postgres installs them.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicedb/sluice/internal/freeport"
)

// ErrMissing wraps what is not installed.
var ErrMissing = errors.New("not installed")

// The login role the tests connect as over TCP, with its password.
const (
	User     = "sluice"
	Password = "sluice-test-pw"
)

// superuser is the bootstrap superuser initdb creates; it logs in over the
// unix socket only (trust), to create roles and databases.
const superuser = "postgres"

// Server is a running PostgreSQL.
type Server struct {
	Host      string // 127.0.0.1
	Port      int
	SocketDir string // holds the unix socket .s.PGSQL.<Port>
	Log       string // the server's output
	dir       string
	tls       Options
	cmd       *exec.Cmd
	exited    chan struct{}
}

// Options are how StartWith starts a server.
type Options struct {
	// CertFile and KeyFile, when set, turn TLS on (ssl=on) with this PEM
	// certificate (and chain) and key; the files are copied to the
	// server's directory, owned by its user as postgres requires.
	CertFile, KeyFile string
}

// Start initialises a cluster in a new temporary directory and starts
// postgres on it, waiting until it accepts connections.
func Start(ctx context.Context) (*Server, error) {
	return StartWith(ctx, Options{})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, o Options) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", SocketDir: dir, Log: filepath.Join(dir, "postgres.log"), dir: dir, tls: o}
	if err := s.start(ctx, bin, cred); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, bin string, cred *syscall.Credential) error {
	if cred != nil {
		// The data directory, the socket and the log live in dir: the
		// server's user must own it.
		if err := os.Chown(s.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: give %s to uid %d: %w", s.dir, cred.Uid, err)
		}
	}
	data := filepath.Join(s.dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", superuser,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = s.dir
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		hint := ""
		if cred != nil {
			hint = fmt.Sprintf(" (initdb runs as uid %d: every directory above %s must be searchable by it; set TMPDIR elsewhere if not)", cred.Uid, s.dir)
		}
		return fmt.Errorf("pgtest: initdb%s: %w: %s", hint, err, out)
	}
	// A port picked free can be taken before postgres binds it: try again.
	var lastErr error
	for range 5 {
		port, err := freeport.Port()
		if err != nil {
			return err
		}
		s.Port = port
		if lastErr = s.run(ctx, bin, data, cred); lastErr == nil {
			return s.setup(ctx)
		}
	}
	return lastErr
}

// run starts postgres on s.Port and waits until it answers on its socket.
func (s *Server) run(ctx context.Context, bin, data string, cred *syscall.Credential) error {
	logFile, err := os.Create(s.Log)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// Durability is not what these tests check: no fsync makes commits,
	// and so the catalog's compare-and-swap, cheap on a loaded machine.
	args := []string{"-D", data, "-h", s.Host, "-p", strconv.Itoa(s.Port),
		"-k", s.SocketDir, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=60", "-c", "logging_collector=off"}
	if s.tls.CertFile != "" {
		cert, key, err := s.copyTLSFiles(cred)
		if err != nil {
			return err
		}
		args = append(args, "-c", "ssl=on", "-c", "ssl_cert_file="+cert, "-c", "ssl_key_file="+key)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// SIGQUIT is PostgreSQL's immediate shutdown: a test binary that dies
	// does not leave a server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := s.admin(ctx, "postgres")
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-s.exited:
			out, _ := os.ReadFile(s.Log)
			return fmt.Errorf("pgtest: postgres on port %d exited: %s", s.Port, out)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(s.Log)
			return fmt.Errorf("pgtest: postgres on port %d not ready after 60s: %v: %s", s.Port, err, out)
		}
	}
}

// setup creates the login role the tests use.
func (s *Server) setup(ctx context.Context) error {
	return s.Exec(ctx, "postgres", fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", User, Password))
}

// admin connects as the superuser over the unix socket.
func (s *Server) admin(ctx context.Context, database string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database, cfg.Password = s.SocketDir, uint16(s.Port), superuser, database, ""
	cfg.ConnectTimeout = 5 * time.Second
	cfg.Fallbacks = nil
	cfg.TLSConfig = nil
	return pgx.ConnectConfig(ctx, cfg)
}

// Exec runs SQL statements as the superuser in database.
func (s *Server) Exec(ctx context.Context, database, sql string) error {
	conn, err := s.admin(ctx, database)
	if err != nil {
		return fmt.Errorf("pgtest: connect to %s: %w", database, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgtest: %s: %w", sql, err)
	}
	return nil
}

// CreateDatabase creates a database owned by User and returns its URL
// with User's credentials.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := s.Exec(ctx, "postgres", fmt.Sprintf("CREATE DATABASE %s OWNER %s", pgx.Identifier{name}.Sanitize(), User)); err != nil {
		return "", err
	}
	return s.URL(name), nil
}

// URL is the postgres:// URL of database with User's credentials, over TCP.
func (s *Server) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(User, Password),
		Host:     net.JoinHostPort(s.Host, strconv.Itoa(s.Port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Stop shuts the server down (fast shutdown, then a kill) and removes its
// directory.
func (s *Server) Stop() {
	if s == nil {
		return
	}
	if s.cmd != nil && s.cmd.Process != nil {
		select {
		case <-s.exited:
		default:
			s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
			select {
			case <-s.exited:
			case <-time.After(10 * time.Second):
				s.cmd.Process.Kill()
				<-s.exited
			}
		}
	}
	os.RemoveAll(s.dir)
}

// binDir finds the directory holding initdb and postgres.
func binDir() (string, error) {
	if d := os.Getenv("SLUICE_PG_BINDIR"); d != "" {
		return d, hasBinaries(d)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		d := filepath.Dir(p)
		if hasBinaries(d) == nil {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first: 9.6 < 10 < 15 compare as numbers.
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if hasBinaries(d) == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL's initdb and postgres (PATH, /usr/lib/postgresql/*/bin, SLUICE_PG_BINDIR): %w (run scripts/install-postgres)", ErrMissing)
}

func majorOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func hasBinaries(dir string) error {
	for _, b := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("%s in %s: %w (run scripts/install-postgres)", b, dir, ErrMissing)
		}
	}
	return nil
}

// runAs is the credential the server runs with: nil (the current user)
// unless we are root, which PostgreSQL refuses.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	name := os.Getenv("SLUICE_PG_USER")
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root, and the user %q to run it as: %w (run scripts/install-postgres, which creates it, or set SLUICE_PG_USER)", name, errors.Join(err, ErrMissing))
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	if uid == 0 {
		return nil, fmt.Errorf("pgtest: user %q is root; PostgreSQL refuses to run as root", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// ConnString is a libpq keyword/value connection string for database over
// TCP, without credentials (tests give them through PGUSER/PGPASSWORD).
func (s *Server) ConnString(database string) string {
	return strings.Join([]string{"host=" + s.Host, "port=" + strconv.Itoa(s.Port), "dbname=" + database, "sslmode=disable"}, " ")
}

// copyTLSFiles copies the certificate and key into the server's directory,
// readable by the server's user only (postgres refuses a key others can
// read).
func (s *Server) copyTLSFiles(cred *syscall.Credential) (cert, key string, err error) {
	cert, key = filepath.Join(s.dir, "server.crt"), filepath.Join(s.dir, "server.key")
	for from, to := range map[string]string{s.tls.CertFile: cert, s.tls.KeyFile: key} {
		data, err := os.ReadFile(from)
		if err != nil {
			return "", "", fmt.Errorf("pgtest: %w", err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			return "", "", fmt.Errorf("pgtest: %w", err)
		}
		if cred != nil {
			if err := os.Chown(to, int(cred.Uid), int(cred.Gid)); err != nil {
				return "", "", fmt.Errorf("pgtest: give %s to uid %d: %w", to, cred.Uid, err)
			}
		}
	}
	return cert, key, nil
}
