package cluster

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Key routing (docs/cluster.md, "Key queries"): a cluster query for hashBy
// values of a table whose Kafka message keys are those values asks only
// the nodes that may hold store rows of the values' partitions. Each node
// reports its Holdings; a coordinator keeps every other node's in Views,
// each under a lease, and routes only when it has a live lease on every
// member.
//
// Why a lease makes it exact: a node adds a partition to its holdings
// before it stores any row of it (the assignment waits), and tells every
// member at once; a member applies the news before it acknowledges. A
// member that did not acknowledge may still route on a report it asked
// for before the gain, so the node waits one lease from the gain before
// storing: that report's lease (counted from when it was asked for) has
// run out by then. A coordinator that does not see a node hold a
// partition therefore knows that the node stored no row of it before the
// query began. Losses need no news: a report that still lists a partition
// only asks one node too many.

// Holdings is what a node reports for routing, in GET /v1/cluster and when
// it gains partitions.
type Holdings struct {
	// Node is the node's id (it changes when the process restarts).
	Node string `json:"node"`
	// Version grows with every change of Tables.
	Version uint64                   `json:"version"`
	Tables  map[string]TableHoldings `json:"tables"`
}

// TableHoldings are one routed table's partitions on a node.
type TableHoldings struct {
	// Ready is false until the node knows what its store holds (at
	// start, before it read the topics' partition counts and its stored
	// positions): nobody routes around it until then.
	Ready bool `json:"ready"`
	// Partitions are the topics' partition counts the node found.
	Partitions map[string]int32 `json:"partitions,omitempty"`
	// Assigned are the partitions the node consumes now.
	Assigned map[string][]int32 `json:"assigned,omitempty"`
	// Holds are the partitions of which the node's store may hold rows
	// that the Iceberg table does not: those assigned, and those it
	// stored rows of and has not shown to be committed.
	Holds map[string][]int32 `json:"holds,omitempty"`
	// Off, when not empty, says why the node's rows of the table are not
	// where their keys say (a message in another partition than its key
	// hashes to, or rows routed by another partition count): no
	// coordinator routes the table while a live report says so.
	Off string `json:"off,omitempty"`
}

// holdsAny reports whether h holds a partition of want.
func (h TableHoldings) holdsAny(want map[string][]int32) bool {
	for topic, ps := range want {
		for _, p := range ps {
			if slices.Contains(h.Holds[topic], p) {
				return true
			}
		}
	}
	return false
}

// Views are a coordinator's copies of the other nodes' Holdings.
type Views struct {
	// Lease is how long a report counts, from when it was asked for.
	Lease time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu     sync.Mutex
	byNode map[string]*view  // node id → its latest report
	byURL  map[string]string // member URL → the node id that answered there
}

type view struct {
	h Holdings
	// asked is when the newest report that extends the lease was asked
	// for (zero: only announcements, no lease).
	asked time.Time
}

func (v *Views) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Views) init() {
	if v.byNode == nil {
		v.byNode, v.byURL = map[string]*view{}, map[string]string{}
	}
}

// Polled records the report h that member url sent when asked at asked.
// The newer of h and what is known is kept (an announcement may have
// brought a newer one first); the lease runs from asked either way: the
// node told every gain after asked, or waited a lease before storing.
func (v *Views) Polled(url string, asked time.Time, h Holdings) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.init()
	if old, ok := v.byURL[url]; ok && old != h.Node {
		delete(v.byNode, old) // the process restarted
	}
	v.byURL[url] = h.Node
	e := v.byNode[h.Node]
	if e == nil {
		v.byNode[h.Node] = &view{h: h, asked: asked}
		return
	}
	if h.Version >= e.h.Version {
		e.h = h
	}
	if asked.After(e.asked) {
		e.asked = asked
	}
}

// Announced records a report a node sent of itself (a gain); the caller
// acknowledges only after it returns true. It never extends a lease. It
// returns false for a node no poll has answered as yet: this node cannot
// tell at which member URL it is (a restarted process has a new id, and
// the report of the old one may still be live), so the node must wait out
// the lease instead.
func (v *Views) Announced(h Holdings) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.init()
	e := v.byNode[h.Node]
	if e == nil {
		return false
	}
	if h.Version > e.h.Version {
		e.h = h
	}
	return true
}

// NotRoutable says why Route asks every node.
type NotRoutable struct{ Why string }

func (e *NotRoutable) Error() string { return "key routing: " + e.Why }

// Route returns the members that may hold rows of the partitions want
// (topic → partitions) of table, leaving out self (this node's id, which
// reads its own store anyway): those whose live report holds one of them,
// and those without a live, ready report (nothing is known of them: a
// node that is down is asked, and fails the query as it would without
// routing). counts are the topics' partition counts the caller computed
// want with; when a node found others, the partitions of the keys are in
// doubt and Route fails (*NotRoutable): ask every node.
func (v *Views) Route(members []string, self, table string, counts map[string]int32, want map[string][]int32) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.init()
	now := v.now()
	var asked []string
	for _, url := range members {
		id, ok := v.byURL[url]
		if ok && id == self {
			continue
		}
		var e *view
		if ok {
			e = v.byNode[id]
		}
		if e == nil || e.asked.IsZero() || now.Sub(e.asked) >= v.Lease {
			asked = append(asked, url) // no live report
			continue
		}
		th, ok := e.h.Tables[table]
		if ok && th.Off != "" {
			return nil, &NotRoutable{fmt.Sprintf("%s: %s", url, th.Off)}
		}
		if !ok || !th.Ready {
			asked = append(asked, url)
			continue
		}
		for topic, n := range counts {
			if th.Partitions[topic] != n {
				return nil, &NotRoutable{fmt.Sprintf("%s counts %d partitions of %s, this node %d", url, th.Partitions[topic], topic, n)}
			}
		}
		if th.holdsAny(want) {
			asked = append(asked, url)
		}
	}
	return asked, nil
}
