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
//
// Tokens are short (literal runs of at most 32 bytes, back references of
// mostly 3-16), so a call to memmove per token would cost more than the
// copy itself. Where the buffers have room, tokens are therefore copied as
// fixed-size arrays (a few register moves), possibly writing a few bytes
// past the token's end; those bytes lie inside out and are overwritten by
// the following tokens, since a successful decode fills out exactly.
// Nothing is ever written at or past len(out).
func lzfDecompress(in, out []byte) error {
	ip, op := 0, 0
	for ip < len(in) {
		ctrl := int(in[ip])
		ip++
		if ctrl < 32 { // literal run of ctrl+1 bytes
			n := ctrl + 1
			if ip+32 <= len(in) && op+32 <= len(out) {
				dst, src := (*[32]byte)(out[op:op+32]), (*[32]byte)(in[ip:ip+32])
				*(*[16]byte)(dst[:16]) = *(*[16]byte)(src[:16])
				if n > 16 {
					*(*[16]byte)(dst[16:]) = *(*[16]byte)(src[16:])
				}
			} else {
				if ip+n > len(in) {
					return errLZFInput
				}
				if op+n > len(out) {
					return errLZFOverflow
				}
				copy(out[op:op+n], in[ip:ip+n])
			}
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
		switch dist := op - ref; {
		case dist >= 16 && n <= 32 && op+32 <= len(out):
			// The second half reads at most up to op+16, written by the first.
			dst, src := (*[32]byte)(out[op:op+32]), (*[32]byte)(out[ref:ref+32])
			*(*[16]byte)(dst[:16]) = *(*[16]byte)(src[:16])
			if n > 16 {
				*(*[16]byte)(dst[16:]) = *(*[16]byte)(src[16:])
			}
		case dist >= 8 && n <= 16 && op+16 <= len(out):
			// The second half reads at most up to op+8, written by the first.
			dst, src := (*[16]byte)(out[op:op+16]), (*[16]byte)(out[ref:ref+16])
			*(*[8]byte)(dst[:8]) = *(*[8]byte)(src[:8])
			*(*[8]byte)(dst[8:]) = *(*[8]byte)(src[8:])
		case dist >= n: // no overlap
			copy(out[op:op+n], out[ref:ref+n])
		case n <= 16: // short run of a short pattern
			for i := range n {
				out[op+i] = out[ref+i]
			}
		default:
			// A run repeating the last dist bytes: out[ref:w] always holds
			// whole periods, so copying it forward doubles the run each time.
			for w, end := op, op+n; w < end; {
				w += copy(out[w:end], out[ref:w])
			}
		}
		op += n
	}
	if op != len(out) {
		return errLZFShort
	}
	return nil
}
