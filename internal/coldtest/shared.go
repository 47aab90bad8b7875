package coldtest

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

// SharedTrino is one Trino for a test package: a JVM start costs tens of
// CPU-seconds (more than most of the queries a test asks), so the tests of
// a package share one server, each adding catalogs of its own to it
// (AddCatalog). It starts on first use, or ahead of it with Prestart while
// a test prepares its table; the package's TestMain calls Close.
type SharedTrino struct {
	once  sync.Once
	ready chan struct{}
	tr    *Trino
	err   error
	dir   string
	// Plugins are plugin directories beside the installed ones (see
	// StartTrino); set before the first use.
	Plugins []string
}

// Prestart starts the server in the background if it is not started
// yet, so that its start overlaps the caller's work; Require waits for it.
func (s *SharedTrino) Prestart() {
	s.once.Do(func() {
		s.ready = make(chan struct{})
		go func() {
			defer close(s.ready)
			if s.err = FindTrino(); s.err != nil {
				return
			}
			if s.dir, s.err = os.MkdirTemp("", "trino-"); s.err != nil {
				return
			}
			s.tr, s.err = StartTrino(s.dir, nil, s.Plugins...)
		}()
	})
}

// Require returns the package's Trino, starting it on first use; a
// missing install fails t under CI and skips it elsewhere.
func (s *SharedTrino) Require(t testing.TB) *Trino {
	t.Helper()
	tr, err := s.Get()
	if errors.Is(err, ErrMissing) {
		Require(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// Get is Require for a goroutine of a test (which may not call t.Fatal):
// it waits for the server and returns it, or why it did not start.
func (s *SharedTrino) Get() (*Trino, error) {
	s.Prestart()
	<-s.ready
	return s.tr, s.err
}

// Close stops the server if it was started.
func (s *SharedTrino) Close() {
	if s.ready == nil {
		return
	}
	<-s.ready
	s.tr.Stop()
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// AddCatalog adds the catalog name to tr from the contents of a catalog
// properties file (see CreateCatalog) and drops it when t ends; each test
// names its catalogs apart from the other tests' of the package.
func (tr *Trino) AddCatalog(ctx context.Context, t testing.TB, name, props string) {
	t.Helper()
	if err := tr.CreateCatalog(ctx, name, props); err != nil {
		t.Fatalf("create Trino catalog %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := tr.DropCatalog(ctx, name); err != nil {
			t.Errorf("drop Trino catalog %s: %v", name, err)
		}
	})
}
