package rdb

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The checksum is computed by a helper goroutine running behind the parser:
// the parser hands it the bytes it has passed, in order, and the helper folds
// them into the running CRC. Parsing and summing then overlap on two cores;
// with one core the cost is the same as summing inline.
//
// For an input entirely in memory (a mapped file or a byte slice) the chunks
// are crcChunk slices of the input itself. For a streaming input they are
// the consumed part of the window at each refill; the reader then keeps two
// window buffers and refills into the other one, reusing a buffer only once
// the helper has acknowledged every chunk handed over from it.
//
// Lifetime: the goroutine ends when its channel is closed, by stop (at EOF,
// on error, on Close) or, for a Parser dropped without Close, by a cleanup
// attached to the Parser. stop waits for it, so a mapping is never unmapped
// while the helper reads it.
const (
	crcChunk        = 4 << 20
	crcWorkerMinLen = 4 * crcChunk // below this, summing inline is cheaper than a goroutine
)

type crcWorker struct {
	chunks   chan []byte
	result   chan uint64
	acks     chan struct{} // streaming input: one per chunk summed, in order; nil for static input
	progress atomic.Int64  // bytes summed so far (static input: from offset 0)
	stopOnce sync.Once
	crc      uint64 // valid after stop
}

// startCRCWorker starts the helper summing from initial CRC crc. With acks,
// it reports each chunk done so its buffer can be reused.
func startCRCWorker(crc uint64, acks bool) *crcWorker {
	w := &crcWorker{chunks: make(chan []byte, 4), result: make(chan uint64, 1)}
	if acks {
		w.acks = make(chan struct{}, 64)
	}
	go func(chunks <-chan []byte, result chan<- uint64, acks chan<- struct{}, progress *atomic.Int64) {
		for c := range chunks {
			crc = crc64Update(crc, c)
			progress.Add(int64(len(c)))
			if acks != nil {
				acks <- struct{}{}
			}
		}
		result <- crc
	}(w.chunks, w.result, w.acks, &w.progress)
	return w
}

// add queues the next bytes; it blocks while the helper is 4 chunks behind,
// which bounds how far ahead of the checksum the parser runs.
func (w *crcWorker) add(b []byte) { w.chunks <- b }

// stop ends the helper and returns the CRC of everything added.
func (w *crcWorker) stop() uint64 {
	w.stopOnce.Do(func() {
		close(w.chunks)
		w.crc = <-w.result
	})
	return w.crc
}

// attachCRCWorker starts the helper for a static input of at least
// crcWorkerMinLen bytes; for a streaming input it arranges for the reader to
// start one once the input outgrows the first window.
func (p *Parser) attachCRCWorker() {
	if !p.r.crcOn {
		return
	}
	if !p.r.static() {
		p.r.onWorker = func(w *crcWorker) { runtime.AddCleanup(p, func(w *crcWorker) { w.stop() }, w) }
		return
	}
	if p.r.end < crcWorkerMinLen {
		return
	}
	w := startCRCWorker(0, false)
	p.r.worker = w
	runtime.AddCleanup(p, func(w *crcWorker) { w.stop() }, w)
}
