package rdb

import "encoding/binary"

// crcTable holds slicing-by-8 tables for CRC-64/Jones as Redis computes it
// (crc64.c: reflected polynomial 0xad93d23594c935a9, initial value 0, no final
// xor). hash/crc64 cannot be used directly: it inverts the CRC before and
// after (fixable) and rebuilds its slicing table on every call for custom
// polynomials (not fixable without copying the table logic anyway).
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

// crc64Update extends crc over p.
func crc64Update(crc uint64, p []byte) uint64 {
	t := crcTable
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
