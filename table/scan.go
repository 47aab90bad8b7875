package table

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/slab"
)

// A query decodes its blocks (zstd, the columns, the conversions, the time
// range and the predicates: most of its CPU) on up to scanWorkers cores at
// once, and emits their rows in key order on the caller's goroutine: a
// multi-block range uses the machine while the answer stays ordered and
// the emit callback (an encoder) single-threaded. A block's decoded
// columns are its own job's, so blocks in flight do not share buffers; at
// most 2×workers blocks are decoded ahead of the one being emitted.
//
// The emit callback is the part that does not scale: an answer encoded row
// by row on the caller's goroutine (NDJSON in the server) costs more than
// the decoding. An encoded query (QueryEncoded) moves it onto the workers:
// each job encodes its block's rows into a chunk of its own, and the caller
// only writes the chunks in order. A job's chunk is reused with the job, so
// the memory in flight is the decoded blocks' plus their encoded rows.

// maxScanWorkers bounds the blocks one query decodes at once: past it, a
// query would mostly take cores from the others.
const maxScanWorkers = 8

// scanWorkers is how many blocks a query decodes at once.
func scanWorkers() int { return min(runtime.GOMAXPROCS(0), maxScanWorkers) }

// blockJob is one block: its bytes, its decoded columns, the rows of it
// that match, and their boxed values' source.
type blockJob struct {
	key, val []byte
	dead     []byte // the block's dead-row mark (keyed tables): rows not emitted
	dec      blockDecoder
	byName   map[string]*decodedCol
	boxes    []boxer
	rows     []int32 // matching rows, in order
	err      error
	done     chan struct{}

	// An encoded query's rows: chunk holds the first encoded of rows, ends
	// the end of each in chunk (only under a limit), encodeErr what
	// stopped the encoding at row encoded.
	chunk     []byte
	ends      []int
	encoded   int
	encodeErr error
	borrowed  []borrowBuf // per output column
}

// borrowBuf is an encoded job's own memory for the values of one output
// column that a block does not hold as such (timestamps, JSON).
type borrowBuf struct {
	times []time.Time
	raws  []json.RawMessage
	found foundValues // a path column's
}

// borrow is reset for a query whose values live only during its encode
// call (QueryEncoded): instead of a fresh slab per column and block (the
// query's largest garbage), the boxes point into the decoded block itself
// and the job's buffers, which are written again only for the job's next
// block, after its chunk is written.
func (b *boxer) borrow(c *decodedCol, rows int, buf *borrowBuf) {
	*b = boxer{col: c}
	if c == nil || rows == 0 {
		return
	}
	switch c.typ {
	case Int64:
		b.slab = slab.Of(c.ints[:rows])
	case Float64:
		b.slab = slab.Of(c.floats[:rows])
	case String:
		b.slab = slab.Of(c.strs[:rows])
	case JSON:
		buf.raws = grow(buf.raws, rows)
		for r := range rows {
			buf.raws[r] = json.RawMessage(c.strs[r])
		}
		b.slab = slab.Of(buf.raws)
	case Timestamp:
		buf.times = grow(buf.times, rows)
		for r := range rows {
			buf.times[r] = time.Unix(0, c.ints[r]).UTC()
		}
		b.slab = slab.Of(buf.times)
	default:
		b.slab = newTypeSlab(c, rows)
	}
}

// EncodeFunc appends one row (vals in projection order, valid only during
// the call) to buf and returns the result. An encoded query calls it on
// several goroutines at once.
type EncodeFunc func(buf []byte, vals []any) ([]byte, error)

// encode encodes the job's matching rows into its chunk (on a worker, after
// run), at most limit of them (0: all); vals is the caller's scratch row.
func (j *blockJob) encode(p *plan, encode EncodeFunc, vals []any) {
	j.chunk, j.ends, j.encoded, j.encodeErr = j.chunk[:0], j.ends[:0], 0, nil
	if j.err != nil {
		return
	}
	rows := j.rows
	if len(rows) == 0 {
		return
	}
	if p.limit > 0 && len(rows) > p.limit {
		rows = rows[:p.limit] // no block gives more than the limit
	}
	if len(j.boxes) < len(p.out) {
		j.boxes = make([]boxer, len(p.out))
		j.borrowed = make([]borrowBuf, len(p.out))
	}
	for i, o := range p.out {
		if o.path != nil {
			j.boxes[i].lookup(j.byName[o.src], j.dec.rows, rows, o.path, &j.borrowed[i].found)
			continue
		}
		j.boxes[i].borrow(j.byName[o.name], j.dec.rows, &j.borrowed[i])
	}
	for _, r := range rows {
		for i := range p.out {
			vals[i] = j.boxes[i].at(int(r))
		}
		before := len(j.chunk)
		chunk, err := encode(j.chunk, vals)
		if err != nil {
			j.chunk, j.encodeErr = j.chunk[:before], err // the failed row's bytes are not written
			break
		}
		j.chunk = chunk
		if p.limit > 0 {
			j.ends = append(j.ends, len(j.chunk))
		}
		j.encoded++
	}
	clear(vals) // hold no block's values past the job
	clear(j.boxes)
}

// run decodes the block and finds its matching rows.
func (j *blockJob) run(t *Table, p *plan) {
	j.rows = j.rows[:0]
	j.err = nil
	if p.seqLimit != 0 || p.seqFrom != 0 {
		if _, _, _, seq, _ := parseBlockKey(j.key); (p.seqLimit != 0 && seq >= p.seqLimit) || seq < p.seqFrom {
			return
		}
	}
	if err := j.dec.decode(j.key, j.val, func(name string) bool { _, ok := p.types[name]; return ok }); err != nil {
		j.err = fmt.Errorf("table %s: %w", p.tableName, err)
		return
	}
	t.blocksRead.Add(1)
	t.rowsScanned.Add(int64(j.dec.rows))
	if j.byName == nil {
		j.byName = make(map[string]*decodedCol, len(p.types))
	}
	clear(j.byName)
	for i := range j.dec.n {
		c := &j.dec.cols[i]
		c.convert(p.types[c.name], j.dec.rows)
		j.byName[c.name] = c
	}
	timeCol := j.byName[p.timeName]
	if timeCol == nil {
		j.err = fmt.Errorf("table %s: %w", p.tableName, &CorruptionError{Key: slices.Clone(j.key), Reason: "block lacks the time column"})
		return
	}
	preds := make([]*decodedCol, len(p.preds))
	for i := range p.preds {
		preds[i] = j.byName[p.preds[i].Column]
	}
rows:
	for r := range j.dec.rows {
		if ts := timeCol.ints[r]; ts < p.from || ts >= p.to {
			continue
		}
		if isDead(j.dead, r) {
			continue // superseded or deleted (keyed.go)
		}
		for i := range p.preds {
			if !p.preds[i].match(preds[i], r) {
				continue rows
			}
		}
		j.rows = append(j.rows, int32(r))
	}
	if len(j.rows) == 0 || p.borrow {
		return // an encoded job borrows its boxes (encode)
	}
	if len(j.boxes) < len(p.out) {
		j.boxes = make([]boxer, len(p.out))
	}
	for i, o := range p.out {
		if o.path != nil {
			j.boxes[i].lookup(j.byName[o.src], j.dec.rows, j.rows, o.path, nil)
			continue
		}
		j.boxes[i].reset(j.byName[o.name], j.dec.rows)
	}
}

// scanDriver takes a query's blocks in key order (it is scanBlocks'
// blockFeeder), has each one decoded by a job, inline or on workers, and
// hands the decoded jobs, in key order, to emit on the caller's goroutine.
// The row-wise, the encoded and the block-wise queries differ only in what
// a job does after decoding (encode) and in their emit.
type scanDriver struct {
	t             *Table
	p             *plan
	workers       int // blocks decoded at once; at most 1: inline
	depth         int // decoded blocks held ahead of the one being emitted
	borrowStrings bool
	encode        EncodeFunc // nil: the jobs only decode
	emit          func(*blockJob) (done bool, err error)
	full          func() bool // nil: no limit
	vals          []any       // the inline job's encode scratch
	par           *parallelScan
	inline        blockJob
}

// driver is the scanner's scanDriver: scanWorkers workers (one for a
// serial query) and twice as many blocks held ahead.
func (s *scanner) driver() *scanDriver {
	n := 1
	if !s.p.serial {
		n = scanWorkers()
	}
	return &scanDriver{t: s.t, p: s.p, workers: n, depth: 2 * n, encode: s.encode, emit: s.emitJob, full: s.full, vals: s.vals}
}

// block takes the block at key (the iterator's memory: copied when the
// block is decoded later) and emits the jobs of every block before it that
// is decoded by now; done is true when the emit says so (a limit).
func (d *scanDriver) block(ctx context.Context, key, val, dead []byte) (done bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	if d.par == nil && d.workers > 1 {
		d.par = newParallelScan(d)
	}
	if d.par == nil {
		j := &d.inline
		j.key, j.val, j.dead = key, val, dead
		d.decode(j, d.vals)
		return d.emit(j)
	}
	d.par.submit(key, val, dead)
	for len(d.par.queue) > d.par.depth {
		if done, err := d.emit(d.par.next()); done || err != nil {
			return done, err
		}
	}
	return false, nil
}

// decode runs a job: the block's rows, then their encoding.
func (d *scanDriver) decode(j *blockJob, vals []any) {
	j.dec.borrowStrings = d.borrowStrings
	j.run(d.t, d.p)
	if d.encode != nil {
		j.encode(d.p, d.encode, vals)
	}
}

// finish emits the blocks still in flight (unless err ended the scan or
// the limit is reached) and stops the workers.
func (d *scanDriver) finish(err error) error {
	if d.par == nil {
		return err
	}
	defer d.par.stop()
	if err != nil || (d.full != nil && d.full()) {
		return err
	}
	for len(d.par.queue) > 0 {
		if done, err := d.emit(d.par.next()); done || err != nil {
			return err
		}
	}
	return nil
}

// full reports whether the query's limit is reached.
func (s *scanner) full() bool { return s.p.limit > 0 && s.emitted >= s.p.limit }

// emitJob emits a decoded block's matching rows; done is true when the
// limit is reached.
func (s *scanner) emitJob(j *blockJob) (done bool, err error) {
	if j.err != nil {
		return true, j.err
	}
	if s.encode != nil {
		return s.writeChunk(j)
	}
	p := s.p
	emitted := 0
	defer func() { s.t.rowsEmitted.Add(int64(emitted)) }()
	for _, r := range j.rows {
		for i := range p.out {
			s.vals[i] = j.boxes[i].at(int(r))
		}
		emitted++
		if err := s.emit(p, s.vals); err != nil {
			return true, err
		}
		s.emitted++
		if p.limit > 0 && s.emitted >= p.limit {
			return true, nil
		}
	}
	return false, nil
}

// writeChunk writes an encoded block's rows (those under the limit) and
// returns the error that stopped its encoding, if it stopped before them.
func (s *scanner) writeChunk(j *blockJob) (done bool, err error) {
	n, chunk := j.encoded, j.chunk
	if left := s.p.limit - s.emitted; s.p.limit > 0 && n > left {
		n, chunk = left, chunk[:j.ends[left-1]]
	}
	if n > 0 {
		if err := s.write(chunk, n); err != nil {
			return true, err
		}
		s.emitted += n
		s.t.rowsEmitted.Add(int64(n))
	}
	if cap(j.chunk) > hugeBlockBytes {
		j.chunk = nil // a huge value's chunk is not kept for the job's next blocks
	}
	if j.encodeErr != nil && n == j.encoded {
		return true, j.encodeErr
	}
	return s.full(), nil
}

// parallelScan decodes blocks on worker goroutines; queue holds the
// submitted blocks in key order.
type parallelScan struct {
	t     *Table
	p     *plan
	work  chan *blockJob
	queue []*blockJob
	free  []*blockJob
	last  *blockJob // the job being emitted: free once the next is taken
	depth int
	wg    sync.WaitGroup
}

// newParallelScan starts d's workers.
func newParallelScan(d *scanDriver) *parallelScan {
	ps := &parallelScan{t: d.t, p: d.p, work: make(chan *blockJob, d.depth), depth: d.depth}
	ps.wg.Add(d.workers)
	for range d.workers {
		go func() {
			defer ps.wg.Done()
			vals := make([]any, len(d.p.out))
			for j := range ps.work {
				d.decode(j, vals)
				close(j.done)
			}
		}()
	}
	return ps
}

// submit copies the block into a free job and hands it to the workers.
func (ps *parallelScan) submit(key, val, dead []byte) {
	var j *blockJob
	if n := len(ps.free); n > 0 {
		j, ps.free = ps.free[n-1], ps.free[:n-1]
	} else {
		j = &blockJob{}
	}
	j.key = append(j.key[:0], key...)
	j.val = append(j.val[:0], val...)
	j.dead = append(j.dead[:0], dead...)
	j.done = make(chan struct{})
	ps.queue = append(ps.queue, j)
	ps.work <- j
}

// next waits for the oldest submitted block and takes it off the queue;
// its job is reused once the next block is taken.
func (ps *parallelScan) next() *blockJob {
	j := ps.queue[0]
	<-j.done
	ps.queue = ps.queue[1:]
	if ps.last != nil {
		ps.free = append(ps.free, ps.last)
	}
	ps.last = j
	return j
}

// stop ends the workers once they finish what they hold.
func (ps *parallelScan) stop() {
	close(ps.work)
	ps.wg.Wait()
}
