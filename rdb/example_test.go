package rdb_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/sluicedb/sluice/rdb"
)

func ExampleParser() {
	data, err := os.ReadFile("testdata/fuzz/FuzzParse/handmade-redis74-all")
	if err != nil {
		fmt.Println(err)
		return
	}
	// The seed file is in Go's fuzz corpus format; its second line is the RDB.
	data = unquoteCorpus(data)

	pattern, _ := rdb.KeyPattern("[hz]lp")
	p := rdb.NewParser(bytes.NewReader(data), &rdb.Options{Filter: pattern})
	for p.Next() {
		e := p.Entry()
		fmt.Printf("%s %s (%s)\n", e.Key, e.Type, e.Encoding)
		err := p.Visit(func(el *rdb.Element) error {
			switch el.Kind {
			case rdb.HashField:
				fmt.Printf("  %s = %s\n", el.Member, el.Value)
			case rdb.ZSetMember:
				fmt.Printf("  %s %g\n", el.Member, el.Score)
			}
			return nil
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	var ce *rdb.CorruptionError
	if err := p.Err(); errors.As(err, &ce) {
		fmt.Printf("corrupt at offset %d, key %q: %v\n", ce.Offset, ce.Key, ce.Err)
	}
	// Output:
	// zlp zset (zset-listpack)
	//   a 1
	//   b 2.5
	//   c -Inf
	// hlp hash (hash-listpack)
	//   f = v
	//   n = 12
}
