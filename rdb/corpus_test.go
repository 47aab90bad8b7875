package rdb

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// handmadeCorpus returns hand-built files covering every encoding the parser
// reads, for the truncation test, the fuzz seeds and the reader tests. The
// per-format tests explain each layout; this just gathers them.
func handmadeCorpus() map[string][]byte {
	c := map[string][]byte{}

	w := newRDB(9).aux("redis-ver", "5.0.0").selectDB(0).byte1(opResizeDB).len(3).len(1)
	w.key(rdbString, "plain").str("hello")
	w.byte1(opExpireTimeMs).u64le(1700000000123).key(rdbString, "int8").intStr(-5)
	w.byte1(opExpireTime).u32le(1700000000).key(rdbString, "int32").intStr(-100000)
	w.byte1(opIdle).len(77).byte1(opFreq).byte1(9).key(rdbString, "lzf").lzfStr([]byte{2, 'a', 'b', 'c', 4 << 5, 2}, 9)
	w.key(rdbList, "list").len(3).str("a").intStr(7).str("c")
	w.key(rdbSet, "set").len(2).str("x").str("y")
	w.key(rdbZSet, "zset").len(3).str("a").byte1(3).raw([]byte("1.5")).str("n").byte1(253).str("i").byte1(255)
	w.key(rdbZSet2, "zset2").len(1).str("m").u64le(math.Float64bits(math.Inf(1)))
	w.key(rdbHash, "hash").len(1).str("f").str("v")
	w.key(rdbStreamListpacks, "s1")
	writeStream(w, rdbStreamListpacks)
	c["redis5-basic"] = w.end()

	// Redis Enterprise's opcodes (TestRedisEnterpriseOpcodes).
	w = newRDB(12).aux("redis-ver", "7.4.2").aux("big-used-ram", "11375256").selectDB(0)
	w.byte1(opEntRAMLRU).len(67).key(rdbString, "a").str("b")
	w.byte1(opEntSlotNum).len(1234)
	w.byte1(opExpireTimeMs).u64le(1800000000000).byte1(opEntRAMLRU).len(1<<20).key(rdbSetListpack, "s").str(string(listpack("m1", 7)))
	c["redis-enterprise"] = w.end()

	w = newRDB(4)
	w.key(rdbHashZipmap, "zm").str(string(zipmap("f", "v", strings.Repeat("F", 300), "x")))
	w.key(rdbListZiplist, "zl").str(string(ziplist("a", 0, 13, -100, 1000, 100000, 1<<30, 1<<40, strings.Repeat("z", 300))))
	w.key(rdbZSetZiplist, "zz").str(string(ziplist("m", 3, "n", "1.25")))
	w.key(rdbHashZiplist, "hz").str(string(ziplist("f", "v", "g", 7)))
	w.key(rdbListQuicklist, "ql").len(2).str(string(ziplist("a"))).str(string(ziplist("b", "c")))
	c["redis2-old"] = w.endNoCRC(false)

	var id uint64
	for _, ch := range "ReJSON-RL" {
		id = id<<6 | uint64(strings.IndexRune(moduleNameCharset, ch))
	}
	id = id<<10 | 3
	w = newRDB(12)
	w.byte1(opModuleAux).len(id).len(ModuleUint).len(2).len(ModuleString).str("aux").len(0)
	w.byte1(opFunction2).str("#!lua name=lib\nredis.register_function('f', function() return 1 end)")
	w.byte1(opFunctionPreGA).str("lib").str("LUA").len(1).str("desc").str("code")
	w.byte1(opSlotInfo).len(866).len(1).len(0)
	w.key(rdbModule2, "json").len(id).len(ModuleSint).len(5).len(ModuleFloat).u32le(0).len(ModuleDouble).u64le(0).len(ModuleString).str("p").len(0)
	w.key(rdbListQuicklist2, "ql2").len(2).len(2).str(string(listpack("a", 1, -1, 5000, -70000, 1<<40, strings.Repeat("s", 100)))).len(1).str("plain")
	w.key(rdbSetListpack, "slp").str(string(listpack("m1", 42)))
	w.key(rdbSetIntset, "is").str(string(intset(4, -3, 1<<20)))
	w.key(rdbZSetListpack, "zlp").str(string(listpack("a", 1, "b", "2.5", "c", "-inf")))
	w.key(rdbHashListpack, "hlp").str(string(listpack("f", "v", "n", 12)))
	w.key(rdbHashMetadataPreGA, "rc").len(1).len(1800000000000).str("b").str("2")
	w.key(rdbHashMetadata, "ga").u64le(1800000000000).len(1).len(1).str("a").str("1")
	w.key(rdbHashListpackExPreGA, "lprc").str(string(listpack("f", "v", 1800000000001)))
	w.key(rdbHashListpackEx, "lpga").u64le(1800000000002).str(string(listpack("f", 5, 1800000000002)))
	for _, t := range []byte{rdbStreamListpacks2, rdbStreamListpacks3} {
		w.key(t, "s"+strconv.Itoa(int(t)))
		writeStream(w, t)
	}
	c["redis74-all"] = w.end()

	w = newRDB(13)
	w.byte1(opKeyMeta).len(1).raw([]byte("KMT1")).len(ModuleUint).len(5).len(0)
	w.key(rdbStreamListpacks4, "s4")
	writeStream(w, rdbStreamListpacks4)
	c["redis86-keymeta-stream4"] = w.end()

	w = newRDB(14)
	w.key(rdbStreamListpacks5, "s5")
	writeStream(w, rdbStreamListpacks5)
	c["redis88-stream5"] = w.end()

	w = newValkeyRDB(80).aux("valkey-ver", "9.0.0")
	w.byte1(opKeyMeta).str(strings.Repeat("j", 40)).len(1).len(0).len(99)
	w.key(rdbHashMetadataPreGA, "h2").len(2).str("f").str("v").u64le(1800000000000).str("g").intStr(9).u64le(math.MaxUint64)
	c["valkey9-hash2"] = w.end()
	return c
}

// fixtureFiles returns the real-server fixtures (testdata/redis, owned by the
// fixtures generator) that are present in this checkout.
func fixtureFiles() map[string][]byte {
	out := map[string][]byte{}
	paths, _ := filepath.Glob(filepath.Join("testdata", "redis", "*.rdb"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			out[filepath.Base(p)] = b
		}
	}
	return out
}

// syntheticRDB builds an RDB shaped like a production cache: many small
// strings and integers, listpack hashes, zsets and sets, a few big
// collections in their hash-table encodings, quicklist2 lists. Its size grows
// with n (about 1 KiB per unit).
func syntheticRDB(n int) []byte {
	w := newRDB(11).aux("redis-ver", "7.2.4").aux("redis-bits", "64").selectDB(0).byte1(opResizeDB).len(uint64(n * 8)).len(0)
	val := strings.Repeat("v", 40)
	for i := range n {
		k := "user:" + strconv.Itoa(i)
		w.key(rdbString, k+":name").str("name-" + strconv.Itoa(i) + val)
		w.byte1(opExpireTimeMs).u64le(1900000000000).key(rdbString, k+":visits").intStr(int32(i))
		w.key(rdbHashListpack, k+":profile").str(string(listpack("email", "u"+strconv.Itoa(i)+"@example.com", "age", i%90, "city", "Singapore", "score", i*7)))
		w.key(rdbZSetListpack, k+":recent").str(string(listpack("a", 1, "b", "2.5", "c", i, "d", "3.25")))
		w.key(rdbSetIntset, k+":groups").str(string(intset(2, 1, 2, int64(i%30000))))
		w.key(rdbListQuicklist2, k+":events").len(1).len(2).str(string(listpack("login", "view", "view", "logout", i)))
		if i%50 == 0 {
			w.key(rdbHash, k+":big").len(40)
			for j := range 40 {
				w.str("field-" + strconv.Itoa(j)).str(val)
			}
			w.key(rdbZSet2, k+":board").len(40)
			for j := range 40 {
				w.str("member-" + strconv.Itoa(j)).u64le(math.Float64bits(float64(j) * 1.5))
			}
		}
	}
	return w.end()
}

// syntheticRDBLarge builds a snapshot of bigger values, like a cache of
// serialized objects: 0.5-2 KiB strings (a third LZF-compressed), hashes of
// 20 fields with 100-byte values, 200-member zsets in the skiplist encoding.
func syntheticRDBLarge(n int) []byte {
	w := newRDB(11).aux("redis-ver", "7.2.4").selectDB(0)
	blob := strings.Repeat(`{"id":12345,"name":"some user","tags":["a","b","c"],"active":true}`, 32)
	// An LZF payload as Redis writes it for a repetitive value: one literal
	// run, then long back references of the maximum length.
	lit := []byte(blob[:32])
	comp := append([]byte{31}, lit...)
	ulen := 32
	for ulen+264 <= 2048 {
		comp = append(comp, 0xE0, 255, 31) // length 7+255+2 = 264, distance 32
		ulen += 264
	}
	for i := range n {
		k := "obj:" + strconv.Itoa(i)
		switch i % 3 {
		case 0:
			w.key(rdbString, k).str(blob[:512+i%1536])
		case 1:
			w.key(rdbString, k).lzfStr(comp, ulen)
		case 2:
			w.key(rdbHash, k).len(20)
			for j := range 20 {
				w.str("field-" + strconv.Itoa(j)).str(blob[j : j+100])
			}
		}
		if i%100 == 0 {
			w.key(rdbZSet2, k+":z").len(200)
			for j := range 200 {
				w.str("member-" + strconv.Itoa(j)).u64le(math.Float64bits(float64(j)))
			}
		}
	}
	return w.end()
}
