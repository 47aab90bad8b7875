package archtest

import (
	"reflect"
	"strings"
	"time"

	"github.com/sluicedb/sluice/config"
)

// configKey is one key a config file can set: its YAML path, the section
// that holds it ("tables[].compact") and its name in the section.
type configKey struct {
	path, section, name string
	typ                 reflect.Type
	field               reflect.StructField
	owner               reflect.Type
}

// configKeys walks config.Config as the YAML decoder does: a field's yaml
// tag names it, "-" hides it, ",inline" puts its fields in its parent's
// section, a pointer is an optional section, and a list of structs is a
// section whose path ends in "[]". Every other field is a key.
func configKeys() []configKey {
	var keys []configKey
	var walk func(t reflect.Type, section string)
	walk = func(t reflect.Type, section string) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" {
				continue
			}
			ft := f.Type
			if strings.Contains(opts, "inline") {
				walk(ft, section)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			path := name
			if section != "" {
				path = section + "." + name
			}
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]():
				walk(ft, path)
				continue
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), path+"[]")
				continue
			}
			keys = append(keys, configKey{path: path, section: section, name: name, typ: f.Type, field: f, owner: t})
		}
	}
	walk(reflect.TypeFor[config.Config](), "")
	return keys
}
