package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// Kafka's own murmur2 vectors (UtilsTest.testMurmur2 of the Java client):
// the partition is the hash with its sign bit cleared, modulo the count.
func TestKafkaKeyPartition(t *testing.T) {
	for key, hash := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		for _, n := range []int32{1, 6, 7, 100} {
			want := int32(uint32(hash)&0x7fffffff) % n
			if got := KafkaKeyPartition([]byte(key), n); got != want {
				t.Errorf("KafkaKeyPartition(%q, %d) = %d, want %d", key, n, got, want)
			}
		}
	}
	if got := KafkaKeyPartition(nil, 6); got != KafkaKeyPartition([]byte{}, 6) {
		t.Errorf("a nil key is the empty key: %d", got)
	}
}

func holdings(node string, version uint64, holds ...int32) Holdings {
	return Holdings{Node: node, Version: version, Tables: map[string]TableHoldings{
		"t": {Ready: true, Partitions: map[string]int32{"k": 6}, Holds: map[string][]int32{"k": holds}},
	}}
}

func TestViewsRoute(t *testing.T) {
	now := time.Unix(1000, 0)
	v := &Views{Lease: 3 * time.Second, Now: func() time.Time { return now }}
	members := []string{"http://a", "http://b", "http://c"}
	counts := map[string]int32{"k": 6}
	route := func(p int32) []string {
		t.Helper()
		asked, err := v.Route(members, "A", "t", counts, map[string][]int32{"k": {p}})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(asked)
		return asked
	}
	// Nothing known: every other member is asked (a is unknown too).
	if got := route(1); !slices.Equal(got, members) {
		t.Fatalf("no reports: asked %v, want all", got)
	}
	asked := now.Add(-time.Second)
	v.Polled("http://a", asked, holdings("A", 1, 0))
	v.Polled("http://b", asked, holdings("B", 1, 1, 2))
	v.Polled("http://c", asked, holdings("C", 1, 3))
	if got := route(1); !slices.Equal(got, []string{"http://b"}) {
		t.Fatalf("partition 1: asked %v, want b (a is this node)", got)
	}
	if got := route(5); len(got) != 0 {
		t.Fatalf("partition 5: asked %v, want none", got)
	}
	// An announcement is applied at once, and extends no lease; one from
	// a node no poll has answered is refused (its URL is unknown).
	if v.Announced(holdings("D", 1, 5)) {
		t.Fatal("announcement of an unknown node taken")
	}
	if !v.Announced(holdings("C", 2, 3, 5)) {
		t.Fatal("announcement of a known node refused")
	}
	if got := route(5); !slices.Equal(got, []string{"http://c"}) {
		t.Fatalf("announced gain: asked %v, want c", got)
	}
	// A poll answered before the announcement keeps the newer report,
	// and its lease.
	now = now.Add(1500 * time.Millisecond)
	v.Polled("http://c", now.Add(-100*time.Millisecond), holdings("C", 1, 3))
	if got := route(5); !slices.Equal(got, []string{"http://c"}) {
		t.Fatalf("older poll after the announcement: asked %v, want c", got)
	}
	// b's lease ran out: b is asked whatever it held.
	now = now.Add(1500 * time.Millisecond)
	if got := route(5); !slices.Equal(got, []string{"http://b", "http://c"}) {
		t.Fatalf("b's lease ran out: asked %v, want b and c", got)
	}
	// b restarted (a new id at its URL), not ready yet: asked.
	nb := holdings("B2", 1)
	th := nb.Tables["t"]
	th.Ready = false
	nb.Tables["t"] = th
	v.Polled("http://b", now, nb)
	if got := route(4); !slices.Equal(got, []string{"http://b"}) {
		t.Fatalf("b not ready: asked %v, want b", got)
	}
	// Other partition counts: the keys' partitions are in doubt.
	other := holdings("C", 9)
	other.Tables["t"].Partitions["k"] = 12
	v.Polled("http://c", now, other)
	if _, err := v.Route(members, "A", "t", counts, map[string][]int32{"k": {0}}); err == nil {
		t.Fatal("partition counts differ: routed anyway")
	}
}

// A live report that says routing is off (its node's rows are not where
// their keys say, even before it is ready) stops routing the table; once
// its lease ran out the node is asked anyway, and the others route again.
func TestViewsRouteOff(t *testing.T) {
	now := time.Unix(1000, 0)
	v := &Views{Lease: 3 * time.Second, Now: func() time.Time { return now }}
	members := []string{"http://b", "http://c"}
	counts := map[string]int32{"k": 6}
	want := map[string][]int32{"k": {1}}
	off := holdings("B", 1, 2)
	th := off.Tables["t"]
	th.Ready, th.Off = false, "topic k partition 2 offset 7: its key hashes to partition 1"
	off.Tables["t"] = th
	v.Polled("http://b", now, off)
	v.Polled("http://c", now, holdings("C", 1, 3))
	var nr *NotRoutable
	if _, err := v.Route(members, "A", "t", counts, want); !errors.As(err, &nr) || !strings.Contains(err.Error(), "http://b: topic k partition 2") {
		t.Fatalf("a member says routing is off: %v, want *NotRoutable naming it", err)
	}
	now = now.Add(3 * time.Second)
	v.Polled("http://c", now, holdings("C", 2, 3))
	asked, err := v.Route(members, "A", "t", counts, want)
	if err != nil || !slices.Equal(asked, []string{"http://b"}) {
		t.Fatalf("b's lease ran out: asked %v (%v), want b alone", asked, err)
	}
}
