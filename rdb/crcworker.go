package rdb

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// For an input that is entirely in memory (a mapped file or a byte slice),
// the checksum is computed by a helper goroutine running behind the parser:
// the parser hands it each crcChunk it has passed, in order, and the helper
// folds them into the running CRC. Parsing and summing then overlap on two
// cores; with one core the cost is the same as summing inline.
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
	progress atomic.Int64 // bytes summed so far (from offset 0)
	stopOnce sync.Once
	crc      uint64 // valid after stop
}

func startCRCWorker() *crcWorker {
	w := &crcWorker{chunks: make(chan []byte, 4), result: make(chan uint64, 1)}
	go func(chunks <-chan []byte, result chan<- uint64, progress *atomic.Int64) {
		var crc uint64
		for c := range chunks {
			crc = crc64Update(crc, c)
			progress.Add(int64(len(c)))
		}
		result <- crc
	}(w.chunks, w.result, &w.progress)
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
// crcWorkerMinLen bytes.
func (p *Parser) attachCRCWorker() {
	if !p.r.static() || !p.r.crcOn || p.r.end < crcWorkerMinLen {
		return
	}
	w := startCRCWorker()
	p.r.worker = w
	runtime.AddCleanup(p, func(w *crcWorker) { w.stop() }, w)
}
