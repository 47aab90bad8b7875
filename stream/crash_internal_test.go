package stream

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/sluicedb/sluice/table"
)

// syncCounter is a filesystem that counts syncs and, from the crashAt-th
// one on, makes the strict in-memory filesystem under it ignore syncs: a
// ResetToSyncedState afterwards leaves exactly what a power loss right
// after that sync would have left.
type syncCounter struct {
	vfs.FS
	mem     *vfs.MemFS
	mu      sync.Mutex
	syncs   int
	crashAt int // 0: never
}

func (c *syncCounter) synced() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncs++
	if c.syncs == c.crashAt {
		c.mem.SetIgnoreSyncs(true)
	}
}

type countedFile struct {
	vfs.File
	c *syncCounter
}

func (f countedFile) Sync() error {
	err := f.File.Sync()
	f.c.synced()
	return err
}

func (f countedFile) SyncData() error {
	err := f.File.SyncData()
	f.c.synced()
	return err
}

func (f countedFile) SyncTo(n int64) (bool, error) {
	full, err := f.File.SyncTo(n)
	f.c.synced()
	return full, err
}

func (c *syncCounter) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return countedFile{f, c}, nil
}

func (c *syncCounter) Create(name string) (vfs.File, error) { return c.wrap(c.FS.Create(name)) }
func (c *syncCounter) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return c.wrap(c.FS.Open(name, opts...))
}
func (c *syncCounter) OpenReadWrite(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name, opts...))
}
func (c *syncCounter) OpenDir(name string) (vfs.File, error) { return c.wrap(c.FS.OpenDir(name)) }
func (c *syncCounter) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	return c.wrap(c.FS.ReuseForWrite(oldname, newname))
}

// TestWriterCrashAtEverySync: batches of rows and their source position
// are written on a strict in-memory filesystem, and a power loss is
// simulated right after each sync in turn (the filesystem forgets every
// write not synced by then). After each, the store is reopened: the
// position says how many batches are stored and the table holds exactly
// their rows, never rows without their position nor a position without its
// rows. A position committed in a batch of its own after the rows fails
// here at the sync of the rows' batch.
func TestWriterCrashAtEverySync(t *testing.T) {
	const batches, perBatch = 3, 10
	ctx := context.Background()
	open := func(fs vfs.FS) (*table.Store, *table.Table) {
		s, err := table.Open("/db", table.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		tb, err := s.Table(table.Config{Name: "events", SortBy: "ts"})
		if err != nil {
			t.Fatal(err)
		}
		return s, tb
	}
	for crash := 1; ; crash++ {
		mem := vfs.NewStrictMem()
		// The store's directory, synced into its parent: Pebble syncs what
		// it creates inside, not the entry of the directory itself.
		if err := mem.MkdirAll("/db", 0o755); err != nil {
			t.Fatal(err)
		}
		root, err := mem.OpenDir("/")
		if err != nil {
			t.Fatal(err)
		}
		if err := root.Sync(); err != nil {
			t.Fatal(err)
		}
		root.Close()
		fs := &syncCounter{FS: mem, mem: mem}
		s, tb := open(fs)
		fs.mu.Lock()
		fs.crashAt = fs.syncs + crash // syncs of the store's set-up are not crash points
		fs.mu.Unlock()
		w, err := newWriter(Target{Store: s, Table: tb}, "ndjson", nil, kafkaFields, func(*Message) string { return "m" })
		if err != nil {
			t.Fatal(err)
		}
		for b := 1; b <= batches; b++ {
			var msgs []Message
			for i := range perBatch {
				msgs = append(msgs, Message{Offset: int64(i), Body: fmt.Appendf(nil, `{"ts":"2026-01-01T00:00:00Z","b":%d,"i":%d}`, b, i)})
			}
			if _, err := w.Write(ctx, msgs, []Position{{Name: "p", Value: []byte(strconv.Itoa(b))}}); err != nil {
				t.Fatalf("crash point %d: batch %d: %v", crash, b, err)
			}
		}
		s.Close()
		fs.mu.Lock()
		crashed := fs.syncs >= fs.crashAt
		fs.mu.Unlock()
		mem.ResetToSyncedState()
		mem.SetIgnoreSyncs(false)
		s, tb = open(mem)
		pos, err := s.Position("p")
		if err != nil {
			t.Fatal(err)
		}
		stored := 0
		if pos != nil {
			stored, _ = strconv.Atoi(string(pos))
		}
		rows := 0
		if err := tb.Query(ctx, table.Query{}, func(table.Row) error { rows++; return nil }); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if rows != stored*perBatch {
			t.Fatalf("power loss after sync %d of the batches: position says %d batches stored, the table holds %d rows (want %d)", crash, stored, rows, stored*perBatch)
		}
		if !crashed {
			if stored != batches {
				t.Fatalf("no crash: %d batches stored, want %d", stored, batches)
			}
			t.Logf("%d crash points, each after one sync: rows and position together every time", crash-1)
			return
		}
	}
}
