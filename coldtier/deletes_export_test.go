package coldtier

import (
	"context"

	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"
)

// RowRef names a row of the Iceberg table (its data file and position).
type RowRef = rowRef

// SetRunDeletes makes every run of c delete the rows f names in its
// commit (the entry the key index's join calls in the package).
func SetRunDeletes(c *Compactor, f func(ctx context.Context, tbl *itable.Table) ([]RowRef, error)) {
	c.runDeletes = f
}

// KeyIndexView is what a key index holds: each key's row (by the key's
// encoding), the stale rows, whether it was rebuilt from the table, and
// the snapshot it is valid for.
type KeyIndexView struct {
	Rows     map[string]RowRef
	Stale    []RowRef
	Rebuilt  bool
	Snapshot int64
}

// OpenKeyIndex opens the key index of c's table on keyCols at the table's
// current snapshot (from c's state dir, or rebuilt).
func OpenKeyIndex(ctx context.Context, c *Compactor, keyCols []string) (KeyIndexView, error) {
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if err != nil {
		return KeyIndexView{}, err
	}
	ix, rebuilt, err := openKeyIndex(ctx, tbl, keyCols, c.keyIndexPath())
	if err != nil {
		return KeyIndexView{}, err
	}
	v := KeyIndexView{Rows: map[string]RowRef{}, Rebuilt: rebuilt, Snapshot: ix.snapshot}
	for k, l := range ix.keys {
		v.Rows[k] = ix.ref(l)
	}
	for _, l := range ix.stale {
		v.Stale = append(v.Stale, ix.ref(l))
	}
	return v, nil
}

// BuildKeyIndex builds the key index of c's table from its current
// snapshot whole (not saved), to compare with one brought up to date.
func BuildKeyIndex(ctx context.Context, c *Compactor, keyCols []string) (KeyIndexView, error) {
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if err != nil {
		return KeyIndexView{}, err
	}
	ix, err := buildKeyIndex(ctx, tbl, keyCols)
	if err != nil {
		return KeyIndexView{}, err
	}
	v := KeyIndexView{Rows: map[string]RowRef{}, Rebuilt: true, Snapshot: ix.snapshot}
	for k, l := range ix.keys {
		v.Rows[k] = ix.ref(l)
	}
	for _, l := range ix.stale {
		v.Stale = append(v.Stale, ix.ref(l))
	}
	return v, nil
}

// KeyIndexPath is where c keeps its table's key index.
func KeyIndexPath(c *Compactor) string { return c.keyIndexPath() }

// EncodeKey is the index's encoding of a key's values.
func EncodeKey(vals ...any) (string, error) {
	var b []byte
	var err error
	for _, v := range vals {
		if b, err = appendKey(b, v); err != nil {
			return "", err
		}
	}
	return string(b), nil
}

// FileCounts is how many data files and delete files the manifests of
// the current snapshot of c's table hold (live entries: a delete file no
// data file is planned with still counts).
func FileCounts(ctx context.Context, c *Compactor) (data, deletes int, err error) {
	tbl, err := c.cat.LoadTable(ctx, c.ident)
	if err != nil {
		return 0, 0, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return 0, 0, err
	}
	mans, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		return 0, 0, err
	}
	for _, m := range mans {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return 0, 0, err
			}
			if e.DataFile().ContentType() == iceberg.EntryContentData {
				data++
			} else {
				deletes++
			}
		}
	}
	return data, deletes, nil
}

// SetKeyedDeletes makes every run of c delete, through the key index on
// keyCols, the rows of the keys keys returns (each the key columns'
// values).
func SetKeyedDeletes(c *Compactor, keyCols []string, keys func() [][]any) {
	c.runDeletes = c.keyedDeletes(keyCols, func() [][]byte {
		var out [][]byte
		for _, vals := range keys() {
			var b []byte
			for _, v := range vals {
				var err error
				if b, err = appendKey(b, v); err != nil {
					panic(err)
				}
			}
			out = append(out, b)
		}
		return out
	})
}
