package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/ingest"
)

// An HTTP batch sent with an Idempotency-Key header (the IETF httpapi
// draft's header, as Stripe and others use it) is stored at most once per
// node within limits.idempotency_ttl: the key's record (when, the body's
// CRC-32C and size, the answer) is written in the same synced Pebble batch
// as the rows, so after a kill -9 either both are stored or neither, and a
// retry of a batch whose answer was lost gets the first answer again
// (with Idempotent-Replayed: true) instead of storing the rows twice.
// Without the header a retry after a lost answer may store a batch twice:
// the client chooses (docs/server.md, "Retries and Idempotency-Key").
const (
	idempotencyKeyHeader = "Idempotency-Key"
	replayedHeader       = "Idempotent-Replayed"
	maxIdempotencyKey    = 255
	// idempotencyPrefix names the records among the store's positions:
	// idem/<table>/<key>.
	idempotencyPrefix = "idem/"
)

// Errors of an Idempotency-Key request that is not ingested.
var (
	// errKeyInvalid: empty, too long, or not printable ASCII (400).
	errKeyInvalid = errors.New("invalid Idempotency-Key")
	// errKeyInProgress: a request with the same key is being ingested (409).
	errKeyInProgress = errors.New("a request with this Idempotency-Key is in progress")
	// errKeyReused: the key was used with a different body (422).
	errKeyReused = errors.New("Idempotency-Key already used with a different body")
	// errKeysFull: the table has limits.idempotency_max_keys live keys
	// (429). The request is refused rather than the oldest key evicted:
	// a retry of the evicted key's batch would store it twice without a
	// word, where a refused request stored nothing and says so.
	errKeysFull = errors.New("too many live Idempotency-Keys")
)

// idempotency is the server's state for Idempotency-Key requests.
type idempotency struct {
	mu       sync.Mutex
	inflight map[string]struct{} // record names being ingested
	replays  atomic.Int64        // answers replayed from a record
	// live counts each table's stored records (expired ones too until
	// the sweep deletes them), read from the store at a table's first
	// keyed request and recounted by every sweep; pending counts its
	// new keys being ingested, which may add a record each.
	live    map[string]int
	pending map[string]int
}

// idempotencyRecord is the stored value of a key.
type idempotencyRecord struct {
	At     int64         `json:"at"`   // unix milliseconds of the commit
	Sum    uint32        `json:"sum"`  // CRC-32C of the body as sent
	Size   int64         `json:"size"` // bytes of the body as sent
	Result ingest.Result `json:"result"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// keyedRequest is one request with an Idempotency-Key, from the lookup to
// the end of its ingest.
type keyedRequest struct {
	s     *Server
	table string
	name  string // the record's position name
	// reserved: a new key counted in pending until end; stored: its
	// record was staged with the rows (it may be there from now on).
	reserved bool
	stored   atomic.Bool
	sum      uint32
	size     int64
	replay   *ingest.Result // the stored answer, when this is a retry
}

// parseIdempotencyKey returns the header's key: a string of 1 to 255
// printable ASCII characters, bare or as a structured-field string
// ("..."), as the draft writes it.
func parseIdempotencyKey(v string) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if v == "" || len(v) > maxIdempotencyKey {
		return "", fmt.Errorf("%w: %d bytes (1 to %d)", errKeyInvalid, len(v), maxIdempotencyKey)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", fmt.Errorf("%w: byte %d is %#x (printable ASCII only)", errKeyInvalid, i, v[i])
		}
	}
	return v, nil
}

// beginKeyed looks key up for table name and marks it in progress. The
// caller answers from replay when it is set, and calls end in every case
// once it has answered or ingested. deletes (a DELETE of rows) is summed
// with the body: the same body POSTed and DELETEd under one key is a key
// reused for another request, not a retry.
func (s *Server) beginKeyed(tableName, key string, body *chunkReader, deletes bool) (*keyedRequest, error) {
	k := &keyedRequest{s: s, table: tableName, name: idempotencyPrefix + tableName + "/" + key}
	if deletes {
		k.sum = crc32.Update(k.sum, castagnoli, []byte("DELETE "))
	}
	for _, c := range body.chunks {
		k.sum = crc32.Update(k.sum, castagnoli, c)
		k.size += int64(len(c))
	}
	s.idem.mu.Lock()
	if _, busy := s.idem.inflight[k.name]; busy {
		s.idem.mu.Unlock()
		return nil, errKeyInProgress
	}
	if s.idem.inflight == nil {
		s.idem.inflight = map[string]struct{}{}
	}
	s.idem.inflight[k.name] = struct{}{}
	s.idem.mu.Unlock()
	stored, err := s.store.Position(k.name)
	if err != nil {
		k.end()
		return nil, err
	}
	if stored == nil {
		if err := k.reserve(); err != nil {
			k.end()
			return nil, err
		}
		return k, nil
	}
	var rec idempotencyRecord
	if err := json.Unmarshal(stored, &rec); err != nil {
		k.end()
		return nil, fmt.Errorf("server: idempotency record %q: %w", k.name, err)
	}
	if s.now().Sub(time.UnixMilli(rec.At)) >= s.cfg.Limits.IdempotencyTTL {
		return k, nil // expired, not swept yet: a new request
	}
	if rec.Sum != k.sum || rec.Size != k.size {
		k.end()
		return nil, fmt.Errorf("%w (stored %s ago: %d bytes, CRC-32C %08x; this body: %d bytes, %08x)",
			errKeyReused, s.now().Sub(time.UnixMilli(rec.At)).Round(time.Second), rec.Size, rec.Sum, k.size, k.sum)
	}
	k.replay = &rec.Result
	return k, nil
}

// reserve counts k, a key the table has no record of, against the
// table's bound, or fails with errKeysFull.
func (k *keyedRequest) reserve() error {
	s := k.s
	bound := s.cfg.Limits.IdempotencyMaxKeys
	if bound <= 0 {
		return nil
	}
	s.idem.mu.Lock()
	defer s.idem.mu.Unlock()
	live, known := s.idem.live[k.table]
	if !known {
		n, err := s.countKeys(k.table)
		if err != nil {
			return err
		}
		if s.idem.live == nil {
			s.idem.live, s.idem.pending = map[string]int{}, map[string]int{}
		}
		s.idem.live[k.table], live = n, n
	}
	if live+s.idem.pending[k.table] >= bound {
		return fmt.Errorf("%w: table %q holds %d (limits.idempotency_max_keys), each kept for limits.idempotency_ttl %v; retry once older keys expire, or send the batch without a key",
			errKeysFull, k.table, bound, s.cfg.Limits.IdempotencyTTL)
	}
	s.idem.pending[k.table]++
	k.reserved = true
	return nil
}

// countKeys counts the stored records of table.
func (s *Server) countKeys(table string) (int, error) {
	n := 0
	err := s.store.Positions(idempotencyPrefix+table+"/", func(string, []byte) error {
		n++
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("server: count the Idempotency-Keys of table %s: %w", table, err)
	}
	return n, nil
}

// record is the IngestRecord that stores k's answer with the rows.
func (k *keyedRequest) record() *IngestRecord {
	return &IngestRecord{Name: k.name, Value: func(res ingest.Result) []byte {
		k.stored.Store(true)
		b, err := json.Marshal(idempotencyRecord{At: k.s.now().UnixMilli(), Sum: k.sum, Size: k.size, Result: res})
		if err != nil {
			panic(err) // a Result always marshals
		}
		return b
	}}
}

// end ends k's progress mark; a new key whose record was staged counts
// as live from now on (if its batch failed after all, the next sweep's
// count corrects it).
func (k *keyedRequest) end() {
	k.s.idem.mu.Lock()
	delete(k.s.idem.inflight, k.name)
	if k.reserved {
		k.reserved = false
		k.s.idem.pending[k.table]--
		if k.stored.Load() {
			k.s.idem.live[k.table]++
		}
	}
	k.s.idem.mu.Unlock()
}

// keyedStatus is the answer to an error of beginKeyed.
func keyedStatus(err error) int {
	switch {
	case errors.Is(err, errKeyInvalid):
		return http.StatusBadRequest
	case errors.Is(err, errKeyInProgress):
		return http.StatusConflict
	case errors.Is(err, errKeyReused):
		return http.StatusUnprocessableEntity
	case errors.Is(err, errKeysFull):
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// sweepIdempotency deletes the records older than the TTL.
func (s *Server) sweepIdempotency(ctx context.Context) {
	ttl := s.cfg.Limits.IdempotencyTTL
	now := s.now()
	var expired []string
	// The count is taken under the lock, so that no request ends between
	// the count and its use: a record is then counted here, or by its
	// request's end, or (committed before the walk, ended after) by both,
	// which refuses early until the next sweep but never admits a key
	// beyond the bound.
	s.idem.mu.Lock()
	defer s.idem.mu.Unlock()
	kept := map[string]int{}
	err := s.store.Positions(idempotencyPrefix, func(name string, value []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var rec idempotencyRecord
		if err := json.Unmarshal(value, &rec); err != nil || now.Sub(time.UnixMilli(rec.At)) >= ttl {
			expired = append(expired, name)
		} else if table, _, ok := strings.Cut(strings.TrimPrefix(name, idempotencyPrefix), "/"); ok {
			kept[table]++
		}
		return nil
	})
	if err == nil {
		err = s.store.DeletePositions(expired)
	}
	if err == nil {
		for table := range s.idem.live {
			s.idem.live[table] = kept[table]
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("idempotency keys: sweep failed", "error", err)
		}
		return
	}
	if len(expired) > 0 {
		s.log.Info("idempotency keys: expired records deleted", "records", len(expired), "ttl", ttl.String())
	}
}

// sweepInterval is how often the expired records are deleted: a quarter
// of the TTL, from a second to an hour.
func sweepInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/4, time.Second), time.Hour)
}

// keyedRequest starts a request that carries an Idempotency-Key header.
// answered: the request is answered already (a replay or an error);
// otherwise the caller ingests with k.record() and calls k.end().
func (s *Server) keyedRequest(w http.ResponseWriter, tableName, header string, body *chunkReader, deletes bool) (k *keyedRequest, answered bool) {
	key, err := parseIdempotencyKey(strings.TrimSpace(header))
	if err == nil {
		k, err = s.beginKeyed(tableName, key, body, deletes)
	}
	if err != nil {
		code := keyedStatus(err)
		if code == http.StatusInternalServerError {
			s.log.Error("ingest: idempotency key lookup failed", "table", tableName, "error", err)
		}
		writeError(w, code, err.Error())
		return nil, true
	}
	if k.replay != nil {
		k.end()
		s.idem.replays.Add(1)
		w.Header().Set(replayedHeader, "true")
		writeJSON(w, http.StatusOK, ingestResponse{Result: *k.replay})
		return nil, true
	}
	return k, false
}
