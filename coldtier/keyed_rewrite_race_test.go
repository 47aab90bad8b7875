package coldtier_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier"
)

// TestKeyedRewriteAfterOtherNodesDeletes: node a's maintenance has merged
// its small files into new ones (their rows read with the position deletes
// of the snapshot it planned on) and staged the replace; node b commits a
// run that changes keys of those files before a's commit (through a's
// rewrite hook). b's run deletes the old rows by their positions in a's
// files: were a's replace committed on top of it, the old rows would come
// back in the new files, where no delete names them, and every engine would
// read those keys twice. The replace must give way (Iceberg's own rewrite
// refuses to commit over new deletes of the files it replaces); the next
// pass rewrites the files with b's deletes applied.
func TestKeyedRewriteAfterOtherNodesDeletes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	shared, nodes, tables := keyedPair(t, ctx, "keyed-rewrite-other-deletes")
	want := keyState{}
	offA, offB := new(int64), new(int64)
	for i := range int64(4) { // four runs: four small files a day
		want.upsert(t, tables[0], span(i*10, i*10+10), "v1", offA)
		runNode(t, ctx, nodes, 0)
	}
	checkSluice(t, nodes[0], "after a's runs", want)

	staged := 0
	coldtier.SetHooks(nodes[0], coldtier.Hooks{RewriteStaged: func() {
		staged++
		if staged > 1 {
			return
		}
		*offB = 100
		want.upsert(t, tables[1], span(0, 40), "later", offB)
		want.remove(t, tables[1], span(35, 40), offB)
		if stats := runNode(t, ctx, nodes, 1); stats.Deleted == 0 {
			t.Errorf("b's run deleted no row of a's files (%+v): the test needs it to", stats)
		}
	}})
	ms, err := nodes[0].Maintain(ctx, coldtier.MaintainOptions{SnapshotAge: time.Hour, NoExpire: true})
	if err != nil {
		t.Fatal(err)
	}
	coldtier.SetHooks(nodes[0], coldtier.Hooks{})
	if staged == 0 {
		t.Fatalf("a's maintenance staged no rewrite (%+v): the test needs one", ms)
	}
	checkSluice(t, nodes[0], "a, after its maintenance raced b's run", want)
	checkSluice(t, nodes[1], "b, after a's maintenance raced its run", want)
	checkEngines(t, shared, "after a's maintenance raced b's run", want)

	ms, err = nodes[0].Maintain(ctx, coldtier.MaintainOptions{SnapshotAge: time.Hour, NoExpire: true})
	if err != nil {
		t.Fatal(err)
	}
	if ms.FilesRewritten == 0 {
		t.Errorf("the next pass rewrote no file (%+v)", ms)
	}
	checkSluice(t, nodes[0], "a, after its next maintenance", want)
	checkEngines(t, shared, "after a's next maintenance", want)
}
