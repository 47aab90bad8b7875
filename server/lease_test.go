package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// commitLoad keeps rows coming to every node and every node committing
// (on demand in a loop, beside its 50 ms schedule), each commit deleting
// its rows from the store. Node i stores n = i*1e6, i*1e6+1, ...;
// stored[i] counts the rows it acknowledged.
type commitLoad struct {
	stored  []atomic.Int64
	commits atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startCommitLoad(t *testing.T, nodes []*testServer) *commitLoad {
	const batch = 20
	l := &commitLoad{stored: make([]atomic.Int64, len(nodes)), stop: make(chan struct{})}
	for i, s := range nodes {
		l.wg.Add(2)
		go func() {
			defer l.wg.Done()
			for k := 0; ; k += batch {
				select {
				case <-l.stop:
					return
				default:
				}
				var b strings.Builder
				for j := k; j < k+batch; j++ {
					fmt.Fprintf(&b, `{"user":"u%d","ts":"2024-05-01T10:00:00Z","n":%d}`+"\n", j%50, i*1e6+j)
				}
				resp, err := http.Post(s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
				if err != nil {
					t.Errorf("ingest: %v", err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("ingest: status %d", resp.StatusCode)
					return
				}
				l.stored[i].Store(int64(k + batch))
				time.Sleep(5 * time.Millisecond)
			}
		}()
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				resp, err := http.Post(s.url+"/v1/tables/events/compact", "application/json", nil)
				if err != nil {
					t.Errorf("compact: %v", err)
					return
				}
				var res struct {
					Rows int64 `json:"rows"`
				}
				json.NewDecoder(resp.Body).Decode(&res)
				resp.Body.Close()
				if resp.StatusCode == 200 && res.Rows > 0 {
					l.commits.Add(1)
				}
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

func (l *commitLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// startColdCluster starts nodeCount nodes of exactClusterConfig.
func startColdCluster(t *testing.T, nodeCount int) []*testServer {
	lns := make([]net.Listener, nodeCount)
	var members []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		members = append(members, "http://"+ln.Addr().String())
	}
	warehouse, catalog := t.TempDir(), filepath.Join(t.TempDir(), "catalog.db")
	nodes := make([]*testServer, nodeCount)
	for i, ln := range lns {
		nodes[i] = serveConfigOn(t, exactClusterConfig(members, fmt.Sprintf("node%d", i), warehouse, catalog), "", ln)
	}
	for _, s := range nodes {
		waitReady(t, s.url)
	}
	return nodes
}

func openLease(t *testing.T, node string, ttl string) (int, Lease, string) {
	t.Helper()
	resp, err := http.Post(node+"/v1/tables/events/leases", "application/json", strings.NewReader(fmt.Sprintf(`{"ttl":%q}`, ttl)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var l Lease
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("lease %s: %v", b, err)
		}
	}
	return resp.StatusCode, l, string(b)
}

// readSplit reads one split under a lease: the n of each row, the status,
// and the error (a body or a last error line).
func readSplit(t *testing.T, node string, lease Lease, split LeaseSplit) (ns []int, code int, failure string) {
	t.Helper()
	if split.Node == "" {
		split.Node = node
	}
	resp, err := http.Get(split.Node + "/v1/tables/events/query?" + url.Values{"tier": {split.Tier}, "lease": {lease.ID}, "columns": {"n"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, string(b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var row struct {
			N     *int   `json:"n"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if row.Error != "" {
			return ns, 200, row.Error
		}
		ns = append(ns, *row.N)
	}
	if err := sc.Err(); err != nil {
		return ns, 200, err.Error()
	}
	return ns, 200, ""
}

func leaseDone(t *testing.T, node string, lease Lease) int {
	t.Helper()
	resp, err := http.Post(node+"/v1/tables/events/leases/"+lease.ID+"/done", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestLeaseExactDuringCommits: three nodes commit into one Iceberg table
// all the time while rows keep coming; a client opens a lease on one node
// and reads its splits one by one, in a random order and with pauses in
// between (as Trino's workers do), each a separate request. Every row
// stored before the lease comes once, and none twice.
func TestLeaseExactDuringCommits(t *testing.T) {
	nodes := startColdCluster(t, 3)
	load := startCommitLoad(t, nodes)
	deadline := time.Now().Add(8 * time.Second)
	reads := 0
	for ; time.Now().Before(deadline) || reads < 20; reads++ {
		coordinator := nodes[reads%len(nodes)].url
		before := make([]int64, len(nodes))
		for i := range before {
			before[i] = load.stored[i].Load()
		}
		code, lease, body := openLease(t, coordinator, "1m")
		if code != 200 {
			t.Fatalf("lease from %s: %d %s", coordinator, code, body)
		}
		if len(lease.Splits) != len(nodes) {
			t.Fatalf("lease %+v: want %d splits", lease, len(nodes))
		}
		seen := map[int]int{}
		for _, i := range rand.Perm(len(lease.Splits)) {
			time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond) // commits would happen here
			ns, code, failure := readSplit(t, coordinator, lease, lease.Splits[i])
			if code != 200 || failure != "" {
				t.Fatalf("split %+v: %d %s", lease.Splits[i], code, failure)
			}
			for _, n := range ns {
				seen[n]++
			}
			if code := leaseDone(t, coordinator, lease); code != http.StatusNoContent {
				t.Fatalf("done: %d", code)
			}
		}
		var twice, lost []int
		for n, times := range seen {
			if times > 1 {
				twice = append(twice, n)
			}
		}
		for i := range nodes {
			for j := range int(before[i]) {
				if seen[i*1e6+j] == 0 {
					lost = append(lost, i*1e6+j)
				}
			}
		}
		if len(twice) > 0 || len(lost) > 0 {
			t.Fatalf("lease read %d from %s (%d commits so far): %d rows seen twice (%v), %d stored before it missing (%v)",
				reads, coordinator, load.commits.Load(), len(twice), head(twice), len(lost), head(lost))
		}
	}
	if load.commits.Load() < 10 {
		t.Errorf("%d commits with rows during %d lease reads: the test did not race them", load.commits.Load(), reads)
	}
	t.Logf("%d lease reads, %d on-demand commits with rows", reads, load.commits.Load())
}

// TestLeaseEnds: a lease holds every node's commits until its splits are
// read (the use count), until the client ends it, or until its TTL fires;
// a read under an ended lease fails with 410 and says why, rather than
// reading outside the cut.
func TestLeaseEnds(t *testing.T) {
	nodes := startColdCluster(t, 3)
	for i, s := range nodes {
		post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson",
			strings.NewReader(fmt.Sprintf(`{"user":"u1","ts":"2024-05-01T10:00:00Z","n":%d}`+"\n", i)))
	}
	compact := func(node string) chan struct{} {
		done := make(chan struct{})
		go func() {
			resp, err := http.Post(node+"/v1/tables/events/compact", "application/json", nil)
			if err == nil {
				resp.Body.Close()
			}
			close(done)
		}()
		return done
	}
	compactWithin := func(node string, d time.Duration) bool {
		select {
		case <-compact(node):
			return true
		case <-time.After(d):
			return false
		}
	}

	// The use count: held until the last split's done.
	_, lease, _ := openLease(t, nodes[0].url, "1m")
	held := compact(nodes[2].url)
	select {
	case <-held:
		t.Errorf("a member committed while the lease held")
	case <-time.After(300 * time.Millisecond):
	}
	for range len(lease.Splits) - 1 {
		leaseDone(t, nodes[0].url, lease)
	}
	select {
	case <-held:
		t.Errorf("a member committed before the last split was done")
	case <-time.After(100 * time.Millisecond):
	}
	leaseDone(t, nodes[0].url, lease)
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Errorf("a member still held after every split was done")
	}
	if _, code, failure := readSplit(t, nodes[0].url, lease, lease.Splits[1]); code != http.StatusGone || !strings.Contains(failure, "run the statement again") {
		t.Errorf("read after the lease ended: %d %s, want 410", code, failure)
	}
	if code := leaseDone(t, nodes[0].url, lease); code != http.StatusGone {
		t.Errorf("done after the end: %d, want 410", code)
	}

	// DELETE ends it at once.
	_, lease, _ = openLease(t, nodes[1].url, "1m")
	req, _ := http.NewRequest(http.MethodDelete, nodes[1].url+"/v1/tables/events/leases/"+lease.ID, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !compactWithin(nodes[0].url, 5*time.Second) {
		t.Errorf("a member still held after the lease was deleted")
	}

	// The TTL: the hold ends, and so does every read.
	_, lease, _ = openLease(t, nodes[2].url, "400ms")
	total := 0
	for _, split := range lease.Splits {
		ns, code, failure := readSplit(t, nodes[2].url, lease, split)
		if code != 200 || failure != "" {
			t.Errorf("read under a live lease: %d %s", code, failure)
		}
		total += len(ns)
	}
	if total != len(nodes) {
		t.Errorf("%d rows under the lease, want %d", total, len(nodes))
	}
	time.Sleep(600 * time.Millisecond)
	for _, split := range lease.Splits {
		if _, code, failure := readSplit(t, nodes[2].url, lease, split); code != http.StatusGone {
			t.Errorf("split %+v after the TTL: %d %s, want 410", split, code, failure)
		}
	}
	if !compactWithin(nodes[1].url, 5*time.Second) {
		t.Errorf("a member still held after the TTL")
	}

	// Bad TTLs.
	for _, ttl := range []string{"0s", "2h", "soon"} {
		if code, _, body := openLease(t, nodes[0].url, ttl); code != 400 || !strings.Contains(body, "lease ttl") {
			t.Errorf("ttl %q: %d %s, want 400", ttl, code, body)
		}
	}
}

// TestLeaseEndsReadsInProgress: when a lease's TTL fires during a read
// under it, the read fails (an NDJSON error line or a broken body; for
// Arrow always a broken body, whose stream would otherwise end cleanly)
// rather than go on after the hold or end as if complete.
func TestLeaseEndsReadsInProgress(t *testing.T) {
	s := startCluster(t, 1)[0]
	const rows = 400_000
	for lo := 0; lo < rows; lo += 50_000 {
		var b strings.Builder
		for n := lo; n < lo+50_000; n++ {
			fmt.Fprintf(&b, `{"user":"u%d","ts":"2024-05-01T10:00:00Z","n":%d}`+"\n", n%50, n)
		}
		post(t, s.url+"/v1/tables/events/rows", "application/x-ndjson", strings.NewReader(b.String()))
	}
	for _, format := range []string{"ndjson", "arrow"} {
		t.Run(format, func(t *testing.T) {
			code, lease, body := openLease(t, s.url, "500ms")
			if code != 200 {
				t.Fatalf("lease: %d %s", code, body)
			}
			resp, err := http.Get(s.url + "/v1/tables/events/query?" + url.Values{"lease": {lease.ID}, "format": {format}, "tier": {lease.Splits[0].Tier}}.Encode())
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("read: %d", resp.StatusCode)
			}
			// Read a little, then nothing until the TTL has fired: the
			// node is blocked mid-answer on the full socket.
			first := make([]byte, 4096)
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			rest, err := io.ReadAll(resp.Body)
			errorLine := format == "ndjson" && strings.Contains(string(rest), `{"error":"read lease ended: lease `+lease.ID+` expired`)
			if err == nil && !errorLine {
				t.Fatalf("%d bytes read to a clean end after the lease's TTL fired (last: %.200q)", len(first)+len(rest), rest[max(0, len(rest)-200):])
			}
			if format == "arrow" && err == nil {
				t.Fatalf("an Arrow answer ended cleanly after the lease's TTL fired")
			}
			t.Logf("%s: %d bytes, then %v (error line: %v)", format, len(first)+len(rest), err, errorLine)
		})
	}
}

// TestLeasesBoundedPerClient: one client opening more leases at once than
// MaxLeasesPerClient gets exactly that many, the others 429 naming the
// bound; once it ends one it may open another. "At once" is forced: a hook
// holds every opener that passed the bound, before its lease is open, until
// every request has either passed or been refused.
func TestLeasesBoundedPerClient(t *testing.T) {
	nodes := startColdCluster(t, 2)
	extra := 4
	requests := MaxLeasesPerClient + extra
	var passed, refusedEarly atomic.Int32
	allIn := make(chan struct{})
	var allInOnce sync.Once
	checkAllIn := func() {
		if int(passed.Load()+refusedEarly.Load()) == requests {
			allInOnce.Do(func() { close(allIn) })
		}
	}
	hold := func() {
		passed.Add(1)
		checkAllIn()
		select {
		case <-allIn:
		case <-time.After(30 * time.Second): // the counts below fail the test
		}
	}
	afterLeaseReserve.Store(&hold)
	defer afterLeaseReserve.Store(nil)
	codes := make([]int, requests)
	leases := make([]Lease, len(codes))
	bodies := make([]string, len(codes))
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			codes[i], leases[i], bodies[i] = openLease(t, nodes[0].url, "1m")
			if codes[i] == http.StatusTooManyRequests {
				refusedEarly.Add(1)
				checkAllIn()
			}
		})
	}
	wg.Wait()
	afterLeaseReserve.Store(nil)
	var open []Lease
	refused := 0
	for i, code := range codes {
		switch code {
		case http.StatusOK:
			open = append(open, leases[i])
		case http.StatusTooManyRequests:
			refused++
			if !strings.Contains(bodies[i], "MaxLeasesPerClient") || !strings.Contains(bodies[i], "client 127.0.0.1") {
				t.Errorf("429 does not name the bound and the client: %s", bodies[i])
			}
		default:
			t.Fatalf("lease %d: %d %s", i, code, bodies[i])
		}
	}
	end := func(l Lease) {
		req, _ := http.NewRequest(http.MethodDelete, nodes[0].url+"/v1/tables/events/leases/"+l.ID, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	defer func() {
		for _, l := range open {
			end(l)
		}
	}()
	if len(open) != MaxLeasesPerClient || refused != extra {
		t.Fatalf("%d leases opened and %d refused, want %d and %d", len(open), refused, MaxLeasesPerClient, extra)
	}
	end(open[0])
	open = open[1:]
	code, l, body := openLease(t, nodes[0].url, "1m")
	if code != http.StatusOK {
		t.Fatalf("after one ended: %d %s", code, body)
	}
	open = append(open, l)
}
