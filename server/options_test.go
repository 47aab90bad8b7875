package server

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/config"
	"github.com/sluicedb/sluice/rdb"
	"github.com/sluicedb/sluice/rdbtool"
)

// fillEvery sets every settable leaf of v (a struct, or a slice of one element)
// to a value of its own that is not zero.
func fillEvery(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	*n++
	switch {
	case v.Type() == reflect.TypeOf(time.Duration(0)):
		v.SetInt(int64(*n) * int64(time.Second))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() { // config.Secret's inline value is YAML's to set
				fillEvery(t, v.Field(i), n)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillEvery(t, v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillEvery(t, v.Index(0), n)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf(fmt.Sprintf("k%d", *n)), reflect.ValueOf(fmt.Sprintf("s%d", *n)))
		v.Set(m)
	default:
		t.Fatalf("fillEvery: a %s (%s): teach it this kind", v.Type(), v.Kind())
	}
}

// zeroLeaves names the leaves of v that are zero.
func zeroLeaves(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Struct:
		var out []string
		for i := 0; i < v.NumField(); i++ {
			out = append(out, zeroLeaves(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{path}
		}
		var out []string
		for i := 0; i < v.Len(); i++ {
			out = append(out, zeroLeaves(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.Func:
		return nil // a hook the server wires (KafkaOptions.OnAssigned), not a setting
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}

// TestStreamOptionsCopyEveryField: every option of a Kafka or NATS source
// comes from its config section, under the same name (max_message_bytes
// goes to the target: TestMessageBound).
func TestStreamOptionsCopyEveryField(t *testing.T) {
	var k config.KafkaSource
	var nc config.NATSSource
	n := 0
	fillEvery(t, reflect.ValueOf(&k).Elem(), &n)
	fillEvery(t, reflect.ValueOf(&nc).Elem(), &n)
	for _, c := range []struct {
		from, to any
	}{{k, kafkaOptions(k)}, {nc, natsOptions(nc)}} {
		to := reflect.ValueOf(c.to)
		// Conn is built apart, from the tls, sasl and credential keys
		// (kafkaConn, natsConn: TestConnOfTheSection), and so is the
		// schema registry (schemaRegistry: TestSchemaRegistryOfTheSection).
		zero := slices.DeleteFunc(zeroLeaves(to, to.Type().Name()), func(p string) bool {
			return strings.Contains(p, ".Conn.") || strings.Contains(p, ".SchemaRegistry.")
		})
		if len(zero) > 0 {
			t.Errorf("options not set from the config: %v", zero)
		}
		from := reflect.ValueOf(c.from)
		for i := 0; i < to.NumField(); i++ {
			name := to.Type().Field(i).Name
			if to.Field(i).Kind() == reflect.Func || name == "Conn" || name == "SchemaRegistry" {
				continue // hooks: zeroLeaves
			}
			if name == "Changes" {
				// A section of its own: each of its fields under the same name.
				fc, tc := from.FieldByName(name).Elem(), to.Field(i).Elem()
				for j := 0; j < tc.NumField(); j++ {
					if f := fc.FieldByName(tc.Type().Field(j).Name); !f.IsValid() || !reflect.DeepEqual(f.Interface(), tc.Field(j).Interface()) {
						t.Errorf("%s.Changes.%s = %v, not the config's %v", to.Type().Name(), tc.Type().Field(j).Name, tc.Field(j), f)
					}
				}
				continue
			}
			if f := from.FieldByName(name); !f.IsValid() || !reflect.DeepEqual(f.Interface(), to.Field(i).Interface()) {
				t.Errorf("%s.%s = %v, not the config's %v", to.Type().Name(), name, to.Field(i), f)
			}
		}
	}
}

// TestRDBFilterOfTheSection: a table's rdb: section is rdbtool's filter,
// types by name; a table without one selects every key.
func TestRDBFilterOfTheSection(t *testing.T) {
	f, err := rdbFilter(config.RDB{DB: []int{1, 2}, Type: []string{"hash", "zset"}, Prefix: []string{"user:", "a,b:"},
		Pattern: "user:*", Regex: `^user:\d+$`, MinSize: 100000, Batch: 500})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.DBs, []int{1, 2}) || !slices.Equal(f.Types, []rdb.Type{rdb.Hash, rdb.ZSet}) ||
		!slices.Equal(f.Prefixes, []string{"user:", "a,b:"}) || f.Pattern != "user:*" || f.Regex != `^user:\d+$` ||
		f.MinSize != 100000 {
		t.Fatalf("filter %+v", f)
	}
	if f, err := rdbFilter(config.RDB{}); err != nil || !reflect.DeepEqual(f, rdbtool.Filter{}) {
		t.Fatalf("no rdb section: %+v, %v", f, err)
	}
}

// TestValidateOptionsLocatesProblems: what only compute and rdbtool can
// check is refused by New and Check, each problem at its place in the
// config, as config.Validate locates its own; a config that config.Validate
// refused does not trip it.
func TestValidateOptionsLocatesProblems(t *testing.T) {
	const bad = `
tables:
  - name: events
    computed:
      - {name: ok, type: int64, func: "function main(r) return 1 end"}
      - {name: c, type: int64, func: "function main(r) return 1 end", on_error: explode}
    filters:
      - {name: f, func: "gs://bucket/f.lua", engine: v8}
  - name: keys
    rdb: {type: [hash, tree], pattern: "user:[a", regex: "(x"}
`
	cfg, err := config.Parse([]byte(bad), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config found a problem that is not its own: %v", err)
	}
	wants := []string{
		`tables[0] "events": computed[1] "c": unknown on_error "explode" for a column`,
		`tables[0] "events": filters[0] "f": bad func: "gs://bucket/f.lua": unsupported scheme`,
		`tables[0] "events": filters[0] "f": unknown engine "v8"`,
		`tables[1] "keys": rdb.type[1] "tree": want string, list, set, zset, hash, stream or module`,
		`tables[1] "keys": rdb.pattern: rdb: key pattern "user:[a"`,
		`tables[1] "keys": rdb.regex "(x": error parsing regexp`,
	}
	errs := map[string]error{"ValidateOptions": ValidateOptions(cfg), "Check": Check(context.Background(), cfg)}
	_, errs["New"] = New(context.Background(), cfg, Options{StorageDir: t.TempDir()})
	for name, err := range errs {
		if err == nil {
			t.Fatalf("%s accepted the config", name)
		}
		for _, want := range wants {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error lacks %q:\n%v", name, want, err)
			}
		}
	}

	broken, err := config.Parse([]byte("tables: [{name: a, sources: [{}], rdb: {db: [-1], type: [tree]}, computed: [{name: x}]}]"), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("config accepted a source with neither kafka nor nats")
	}
	if err := ValidateOptions(broken); err == nil || !strings.Contains(err.Error(), `rdb.type[0] "tree"`) || !strings.Contains(err.Error(), `func is empty`) {
		t.Fatalf("ValidateOptions of a config config refused: %v", err)
	}
}
