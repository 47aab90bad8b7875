package rdb

import "errors"

var (
	errLZFOverflow = errors.New("lzf: output longer than declared")
	errLZFInput    = errors.New("lzf: input ends inside an instruction")
	errLZFBackref  = errors.New("lzf: back reference before start of output")
	errLZFShort    = errors.New("lzf: output shorter than declared")
)

// lzfMaxRatio bounds how much LZF can expand: the longest back reference is
// 3 bytes for 264 output bytes. A declared length beyond clen*lzfMaxRatio is
// corrupt, which keeps the output buffer proportional to bytes actually read.
const lzfMaxRatio = 88

// lzfDecompress decodes in into out, which must be exactly the declared
// uncompressed length (liblzf's lzf_decompress format).
func lzfDecompress(in, out []byte) error {
	ip, op := 0, 0
	for ip < len(in) {
		ctrl := int(in[ip])
		ip++
		if ctrl < 32 { // literal run of ctrl+1 bytes
			n := ctrl + 1
			if ip+n > len(in) {
				return errLZFInput
			}
			if op+n > len(out) {
				return errLZFOverflow
			}
			copy(out[op:op+n], in[ip:ip+n])
			ip += n
			op += n
			continue
		}
		n := ctrl >> 5
		ref := op - (ctrl&0x1f)<<8 - 1
		if n == 7 {
			if ip >= len(in) {
				return errLZFInput
			}
			n += int(in[ip])
			ip++
		}
		if ip >= len(in) {
			return errLZFInput
		}
		ref -= int(in[ip])
		ip++
		n += 2
		if op+n > len(out) {
			return errLZFOverflow
		}
		if ref < 0 {
			return errLZFBackref
		}
		if op-ref >= n {
			copy(out[op:op+n], out[ref:ref+n])
			op += n
		} else { // overlapping: a run repeating the last op-ref bytes
			for end := op + n; op < end; op++ {
				out[op] = out[ref]
				ref++
			}
		}
	}
	if op != len(out) {
		return errLZFShort
	}
	return nil
}
