package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/jsonw"
	"github.com/sluicedb/sluice/table"
)

// A cluster query of a keyed table answers one row per key (docs/upserts.md,
// "Across nodes"). Each store is exact on its own, but a key whose changes
// reached two nodes (a rebalance moved its source partition) has a row, or
// a delete, in each. The coordinator merges the nodes' answers by key:
//
//   - Every node answers its rows with the key columns, the time column and
//     the source position (table.SourceBatchColumn, table.SourceOffsetColumn),
//     and before them the positioned entries of its key index that may hide
//     another node's row: its deleted keys, and, when the query filters rows
//     (a time range, a where, hashes), its live keys too, since a key whose
//     newer row does not match must not show an older row that does. A node
//     reads its index before its rows, so its rows are never older than its
//     own entries.
//   - Of one key's rows and entries, one of the same source partition with a
//     higher offset supersedes another: a later change of the key. At the
//     same position a deleted key's entry supersedes a row or a live entry:
//     a delete that carries no position of its own (HTTP, a snapshot's
//     leftover keys) keeps the position of the change it followed, so the
//     row at that position, wherever it is held, is older than the delete;
//     a Kafka tombstone has an offset of its own that no row has. Otherwise
//     a row supersedes a live entry at its position (the entry is that
//     row's).
//   - What is left is unordered: changes through two partitions, or without
//     a position (HTTP), have no order between nodes. A row is shown if one
//     is left (a delete hides only the older rows of its own partition); of
//     two, the later time column, then the first node's (the coordinator,
//     then the members in their order).
//
// The merge holds the answer's rows until every node has answered: a
// keyed cluster query's memory grows with its answer (its limit applies to
// the merged rows), unlike an append-only table's, which streams.

// The operation column's values on a key index entry's line of a node's
// answer: keyStateDeleted (the key's last change deleted it) or
// keyStateLive (the key has a row, maybe not in this answer). A row's
// operation column is always null (the store does not keep it).
const (
	keyStateDeleted = table.OperationDelete
	keyStateLive    = "live"
)

// keyStateLine is a member's key index entry in a keyed cluster query's
// answer (NDJSON, before its rows).
type keyStateLine struct {
	Op        string   `json:"_sluice_op"`
	Key       []string `json:"_sluice_key"`
	Partition string   `json:"_sluice_partition"`
	Offset    int64    `json:"_sluice_offset"`
}

// keyedMerge merges the answers of a keyed table's cluster query.
type keyedMerge struct {
	keyCols []string
	timeCol string
	out     []string // the columns the client asked for, in order
	limit   int      // the client's limit (0: none)
	node    int      // the answer being read (0: the coordinator's)
	keys    map[string][]keyedCandidate
	order   []string // keys in the order first seen
	partial []byte   // an unfinished line of the coordinator's own part
}

// keyedCandidate is one node's row or key index entry of a key.
type keyedCandidate struct {
	line       []byte // the row as answered (out's columns); nil: an entry
	partition  string
	offset     int64
	positioned bool
	deleted    bool      // an entry of a key whose last change deleted it
	at         time.Time // the time column's value
	node       int
}

// keyedClusterRequest prepares a cluster query of a keyed table: the
// request every node answers (the client's columns with those the merge
// reads, no limit, Keyed) and the merge; nil for an append-only table.
func keyedClusterRequest(ctx context.Context, ts *tableState, req QueryRequest, format string) (QueryRequest, *keyedMerge, error) {
	keyCols := ts.table.PrimaryKey()
	if len(keyCols) == 0 {
		return req, nil, nil
	}
	if format != "" && format != "ndjson" {
		return req, nil, fmt.Errorf("%w: a cluster query of a table with a primary key answers ndjson only, not %s", errBadQuery, format)
	}
	m := &keyedMerge{keyCols: keyCols, timeCol: ts.cfg.SortBy, limit: req.Limit, keys: map[string][]keyedCandidate{}}
	m.out = slices.Clone(req.Columns)
	if len(m.out) == 0 {
		q, err := req.tableQuery(ts.table)
		if err != nil {
			return req, nil, err
		}
		cols, _, err := splitAbsent(ctx, ts, q)
		if err != nil {
			return req, nil, err
		}
		for _, c := range cols {
			m.out = append(m.out, c.Name)
		}
	}
	cols := slices.Clone(m.out)
	known := map[string]bool{}
	for k := range req.known {
		known[k] = true
	}
	for _, c := range append(slices.Clone(keyCols), m.timeCol, table.SourceBatchColumn, table.SourceOffsetColumn) {
		if c != "" && !slices.Contains(cols, c) {
			cols = append(cols, c)
			// A node whose store lacks the column answers it as null.
			known[c] = true
		}
	}
	req.Columns, req.known, req.Limit, req.Keyed = cols, known, 0, true
	return req, m, nil
}

// filtered reports whether req may leave out rows of live keys: then a
// node answers the entries of its live keys too.
func (r QueryRequest) filtered() bool {
	return r.From != "" || r.To != "" || len(r.Where) > 0 || len(r.Hash) > 0
}

// writeKeyStates writes the positioned entries of ts's key index that a
// keyed cluster query's merge needs (the deleted keys; every key when the
// query is filtered) to w as NDJSON lines.
func writeKeyStates(ctx context.Context, ts *tableState, req QueryRequest, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var buf []byte
	err := ts.table.KeyStates(ctx, req.filtered(), func(st table.KeyState) error {
		if !st.Positioned {
			return nil // orders nothing: it hides no other node's row
		}
		op := keyStateDeleted
		if st.Live {
			op = keyStateLive
		}
		var err error
		buf, err = json.Marshal(keyStateLine{Op: op, Key: st.Key, Partition: st.Partition, Offset: st.Offset})
		if err != nil {
			return err
		}
		if _, err := bw.Write(append(buf, '\n')); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("key states: %w", err)
	}
	return bw.Flush()
}

// own reads the coordinator's key index entries into the merge and
// returns the writer its own rows go to (the answer of node 0).
func (m *keyedMerge) own(ctx context.Context, ts *tableState, req QueryRequest) (io.Writer, error) {
	var buf bytes.Buffer
	if err := writeKeyStates(ctx, ts, req, &buf); err != nil {
		return nil, err
	}
	if _, err := m.Write(buf.Bytes()); err != nil {
		return nil, err
	}
	return m, nil
}

// Write takes NDJSON lines of the answer being read.
func (m *keyedMerge) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.partial = append(m.partial, p...)
			break
		}
		line := p[:i]
		if len(m.partial) > 0 {
			line = append(m.partial, line...)
			m.partial = m.partial[:0]
		}
		if err := m.addLine(line); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	return n, nil
}

// readAnswer reads a member's answer (the next node's) into the merge.
func (m *keyedMerge) readAnswer(r io.Reader) (int, error) {
	m.node++
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if aerr := m.addLine(bytes.TrimSuffix(line, []byte("\n"))); aerr != nil {
				return n, aerr
			}
			n++
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// addLine adds one answered line: a row or a key index entry.
func (m *keyedMerge) addLine(line []byte) error {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		return fmt.Errorf("keyed merge: node %d: line %.80q: %w", m.node, line, err)
	}
	if raw, ok := fields[table.OperationColumn]; ok && string(raw) != "null" {
		var st keyStateLine
		if err := json.Unmarshal(line, &st); err != nil {
			return fmt.Errorf("keyed merge: node %d: key state %.80q: %w", m.node, line, err)
		}
		if len(st.Key) != len(m.keyCols) {
			return fmt.Errorf("keyed merge: node %d: key state with %d key columns, want %d", m.node, len(st.Key), len(m.keyCols))
		}
		m.add(encodeKeyTexts(st.Key), keyedCandidate{partition: st.Partition, offset: st.Offset, positioned: true, deleted: st.Op == keyStateDeleted, node: m.node})
		return nil
	}
	if raw, ok := fields["error"]; ok && len(fields) == 1 {
		return fmt.Errorf("node %d: %s", m.node, raw)
	}
	texts := make([]string, len(m.keyCols))
	for i, k := range m.keyCols {
		t, ok := mergeKeyText(fields[k])
		if !ok {
			return fmt.Errorf("keyed merge: node %d: a row without key column %q", m.node, k)
		}
		texts[i] = t
	}
	c := keyedCandidate{node: m.node}
	var batch string
	if json.Unmarshal(fields[table.SourceBatchColumn], &batch) == nil {
		var off json.Number
		if at := strings.LastIndexByte(batch, '@'); at >= 0 && json.Unmarshal(fields[table.SourceOffsetColumn], &off) == nil {
			if o, err := strconv.ParseInt(off.String(), 10, 64); err == nil {
				c.partition, c.offset, c.positioned = batch[:at], o, true
			} else if f, err := strconv.ParseFloat(off.String(), 64); err == nil {
				c.partition, c.offset, c.positioned = batch[:at], int64(f), true
			}
		}
	}
	if m.timeCol != "" {
		var ts string
		if json.Unmarshal(fields[m.timeCol], &ts) == nil {
			c.at, _ = time.Parse(time.RFC3339Nano, ts)
		}
	}
	out := make([]byte, 0, len(line))
	out = append(out, '{')
	for i, col := range m.out {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonw.AppendString(out, col)
		out = append(out, ':')
		if raw, ok := fields[col]; ok {
			out = append(out, raw...)
		} else {
			out = append(out, "null"...)
		}
	}
	c.line = append(out, '}', '\n')
	m.add(encodeKeyTexts(texts), c)
	return nil
}

// mergeKeyText is a key column's JSON value as the text the store compares keys
// by (table's appendText: integers in decimal, other numbers in the
// shortest 'g' form); ok is false for a null or missing value.
func mergeKeyText(raw json.RawMessage) (string, bool) {
	s := string(bytes.TrimSpace(raw))
	switch {
	case s == "" || s == "null":
		return "", false
	case s[0] == '"':
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return "", false
		}
		return v, true
	case s == "true" || s == "false":
		return s, true
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return strconv.FormatInt(i, 10), true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f == float64(int64(f)) && !strings.ContainsAny(s, "eE") {
			return strconv.FormatInt(int64(f), 10), true
		}
		return strconv.FormatFloat(f, 'g', -1, 64), true
	}
	return s, true
}

// encodeKeyTexts is a map key for a key's column texts.
func encodeKeyTexts(texts []string) string {
	var b []byte
	for _, t := range texts {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
	}
	return string(b)
}

// supersedes reports whether a is a later change of its key than b: the
// same source partition at a higher offset, or at the same offset a
// deleted key's entry over a row or a live entry (the delete followed the
// change at its position), or a row over a live entry (the entry is the
// row's own).
func (a keyedCandidate) supersedes(b keyedCandidate) bool {
	if !a.positioned || !b.positioned || a.partition != b.partition {
		return false
	}
	if a.offset != b.offset {
		return a.offset > b.offset
	}
	if a.deleted || b.deleted {
		return a.deleted && !b.deleted
	}
	return a.line != nil && b.line == nil
}

// add adds one node's candidate of a key: it is dropped if another
// supersedes it (or is the same change), and drops those it supersedes.
func (m *keyedMerge) add(key string, c keyedCandidate) {
	cands, seen := m.keys[key]
	if !seen {
		m.order = append(m.order, key)
	}
	for _, e := range cands {
		if e.supersedes(c) {
			return
		}
		if e.positioned && c.positioned && e.partition == c.partition && e.offset == c.offset && !c.supersedes(e) {
			return // the same change, held by two nodes
		}
	}
	cands = slices.DeleteFunc(cands, func(e keyedCandidate) bool { return c.supersedes(e) })
	m.keys[key] = append(cands, c)
}

// winner is the row shown for a key's candidates; false: none (deleted).
func winner(cands []keyedCandidate) (keyedCandidate, bool) {
	var best keyedCandidate
	found := false
	for _, c := range cands {
		if c.line == nil {
			continue
		}
		if !found || c.at.After(best.at) {
			best, found = c, true
		}
	}
	return best, found
}

// writeTo writes one row per key (never a deleted key) to w, at most the
// client's limit, in the order the keys were first seen; it returns the
// rows written.
func (m *keyedMerge) writeTo(w io.Writer) (int, error) {
	if len(bytes.TrimSpace(m.partial)) > 0 {
		return 0, errors.New("keyed merge: the coordinator's own answer ended mid-line")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	n := 0
	for _, key := range m.order {
		if m.limit > 0 && n >= m.limit {
			break
		}
		c, ok := winner(m.keys[key])
		if !ok {
			continue
		}
		if _, err := bw.Write(c.line); err != nil {
			return n, err
		}
		n++
	}
	return n, bw.Flush()
}
