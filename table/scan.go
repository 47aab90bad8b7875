package table

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// A query decodes its blocks (zstd, the columns, the conversions, the time
// range and the predicates: most of its CPU) on up to scanWorkers cores at
// once, and emits their rows in key order on the caller's goroutine: a
// multi-block range uses the machine while the answer stays ordered and
// the emit callback (an encoder) single-threaded. A block's decoded
// columns are its own job's, so blocks in flight do not share buffers; at
// most 2×workers blocks are decoded ahead of the one being emitted.

// maxScanWorkers bounds the blocks one query decodes at once: past it, a
// query would mostly take cores from the others.
const maxScanWorkers = 8

// scanWorkers is how many blocks a query decodes at once.
func scanWorkers() int { return min(runtime.GOMAXPROCS(0), maxScanWorkers) }

// blockJob is one block: its bytes, its decoded columns, the rows of it
// that match, and their boxed values' source.
type blockJob struct {
	key, val []byte
	dec      blockDecoder
	byName   map[string]*decodedCol
	boxes    []boxer
	rows     []int32 // matching rows, in order
	err      error
	done     chan struct{}
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
		for i := range p.preds {
			if !p.preds[i].match(preds[i], r) {
				continue rows
			}
		}
		j.rows = append(j.rows, int32(r))
	}
	if len(j.rows) == 0 {
		return
	}
	if len(j.boxes) < len(p.out) {
		j.boxes = make([]boxer, len(p.out))
	}
	for i := range p.out {
		j.boxes[i].reset(j.byName[p.out[i].name], j.dec.rows)
	}
}

// block takes the block at key (the iterator's memory: copied when the
// block is decoded later) and emits the rows of every block before it that
// is decoded by now; done is true when the limit is reached.
func (s *scanner) block(ctx context.Context, key, val []byte) (done bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	if s.par == nil && !s.p.serial && scanWorkers() > 1 {
		s.par = newParallelScan(s.t, s.p)
	}
	if s.par == nil {
		j := &s.inline
		j.key, j.val = key, val
		j.run(s.t, s.p)
		return s.emitJob(j)
	}
	s.par.submit(key, val)
	for len(s.par.queue) > s.par.depth {
		if done, err := s.emitJob(s.par.next()); done || err != nil {
			return done, err
		}
	}
	return false, nil
}

// finish emits the blocks still in flight (unless err ended the scan) and
// stops the workers.
func (s *scanner) finish(err error) error {
	if s.par == nil {
		return err
	}
	defer s.par.stop()
	if err != nil || s.full() {
		return err
	}
	for len(s.par.queue) > 0 {
		if done, err := s.emitJob(s.par.next()); done || err != nil {
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

func newParallelScan(t *Table, p *plan) *parallelScan {
	n := scanWorkers()
	ps := &parallelScan{t: t, p: p, work: make(chan *blockJob, 2*n), depth: 2 * n}
	ps.wg.Add(n)
	for range n {
		go func() {
			defer ps.wg.Done()
			for j := range ps.work {
				j.run(t, p)
				close(j.done)
			}
		}()
	}
	return ps
}

// submit copies the block into a free job and hands it to the workers.
func (ps *parallelScan) submit(key, val []byte) {
	var j *blockJob
	if n := len(ps.free); n > 0 {
		j, ps.free = ps.free[n-1], ps.free[:n-1]
	} else {
		j = &blockJob{}
	}
	j.key = append(j.key[:0], key...)
	j.val = append(j.val[:0], val...)
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
