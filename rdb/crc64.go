package rdb

import (
	"encoding/binary"
	"sync"
)

// CRC-64/Jones as Redis computes it (crc64.c: reflected polynomial
// 0xad93d23594c935a9, initial value 0, no final xor). hash/crc64 cannot be
// used directly: it inverts the CRC before and after (fixable) and rebuilds
// its slicing table on every call for custom polynomials (not fixable).
//
// Large inputs are split into three lanes summed in the same loop, so the
// three table-lookup dependency chains overlap in the CPU, then the lanes are
// combined: the CRC is linear without pre/post inversion, so
// crc(c, A||B) = shift(crc(c, A), len(B)) ^ crc(0, B), where shift feeds
// len(B) zero bytes through the register (a fixed 64x64 bit matrix, applied
// here with byte-indexed tables).

var crcTable = makeCRCTable(0x95ac9329ac4bc9b5)

func makeCRCTable(reflectedPoly uint64) *[8][256]uint64 {
	t := new([8][256]uint64)
	for i := range 256 {
		crc := uint64(i)
		for range 8 {
			if crc&1 == 1 {
				crc = crc>>1 ^ reflectedPoly
			} else {
				crc >>= 1
			}
		}
		t[0][i] = crc
	}
	for i := range 256 {
		crc := t[0][i]
		for k := 1; k < 8; k++ {
			crc = t[0][crc&0xff] ^ crc>>8
			t[k][i] = crc
		}
	}
	return t
}

// crcLane is the lane length of the three-way loop.
const crcLane = 4 << 10

var (
	crcShiftOnce  sync.Once
	crcShiftTable *[8][256]uint64 // shift by crcLane zero bytes, by input byte
)

func buildCRCShift() {
	// The image of each of the 64 basis registers, then byte tables from them.
	var basis [64]uint64
	for bit := range 64 {
		v := uint64(1) << bit
		for range crcLane {
			v = crcTable[0][v&0xff] ^ v>>8
		}
		basis[bit] = v
	}
	t := new([8][256]uint64)
	for k := range 8 {
		for b := range 256 {
			var v uint64
			for i := range 8 {
				if b>>i&1 == 1 {
					v ^= basis[8*k+i]
				}
			}
			t[k][b] = v
		}
	}
	crcShiftTable = t
}

func crcShift(v uint64) uint64 {
	t := crcShiftTable
	return t[0][v&0xff] ^ t[1][v>>8&0xff] ^ t[2][v>>16&0xff] ^ t[3][v>>24&0xff] ^
		t[4][v>>32&0xff] ^ t[5][v>>40&0xff] ^ t[6][v>>48&0xff] ^ t[7][v>>56]
}

// crc64Update extends crc over p.
func crc64Update(crc uint64, p []byte) uint64 {
	t := crcTable
	if len(p) >= 3*crcLane {
		crcShiftOnce.Do(buildCRCShift)
		for len(p) >= 3*crcLane {
			a, b, c := crc, uint64(0), uint64(0)
			pa, pb, pc := p[:crcLane], p[crcLane:2*crcLane], p[2*crcLane:3*crcLane]
			for i := 0; i+8 <= len(pa) && i+8 <= len(pb) && i+8 <= len(pc); i += 8 {
				a ^= binary.LittleEndian.Uint64(pa[i:])
				b ^= binary.LittleEndian.Uint64(pb[i:])
				c ^= binary.LittleEndian.Uint64(pc[i:])
				a = t[7][a&0xff] ^ t[6][a>>8&0xff] ^ t[5][a>>16&0xff] ^ t[4][a>>24&0xff] ^
					t[3][a>>32&0xff] ^ t[2][a>>40&0xff] ^ t[1][a>>48&0xff] ^ t[0][a>>56]
				b = t[7][b&0xff] ^ t[6][b>>8&0xff] ^ t[5][b>>16&0xff] ^ t[4][b>>24&0xff] ^
					t[3][b>>32&0xff] ^ t[2][b>>40&0xff] ^ t[1][b>>48&0xff] ^ t[0][b>>56]
				c = t[7][c&0xff] ^ t[6][c>>8&0xff] ^ t[5][c>>16&0xff] ^ t[4][c>>24&0xff] ^
					t[3][c>>32&0xff] ^ t[2][c>>40&0xff] ^ t[1][c>>48&0xff] ^ t[0][c>>56]
			}
			crc = crcShift(crcShift(a)^b) ^ c
			p = p[3*crcLane:]
		}
	}
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint64(p)
		crc = t[7][crc&0xff] ^ t[6][crc>>8&0xff] ^ t[5][crc>>16&0xff] ^ t[4][crc>>24&0xff] ^
			t[3][crc>>32&0xff] ^ t[2][crc>>40&0xff] ^ t[1][crc>>48&0xff] ^ t[0][crc>>56]
		p = p[8:]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return crc
}
