package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix starts every environment override.
const EnvPrefix = "SLUICE"

// applyEnv overrides fields of cfg from environment variables named after
// their YAML path, upper-cased and joined by '_': storage.dir is
// SLUICE_STORAGE_DIR, limits.max_body_bytes is SLUICE_LIMITS_MAX_BODY_BYTES.
// Elements of a list that have a name are addressed by it (upper-cased, '-'
// as '_'): the ttl of table "events" is SLUICE_TABLES_EVENTS_TTL, the func of
// its computed column "score" is SLUICE_TABLES_EVENTS_COMPUTED_SCORE_FUNC;
// other elements by index (SLUICE_TABLES_0_TTL works too). The names are
// generated from the config and looked up, never parsed from the
// environment, so underscores in names are not ambiguous. Lists of strings
// are comma separated. Every bad value is reported.
func applyEnv(cfg *Config, env func(string) (string, bool)) error {
	var errs []error
	walkEnv(reflect.ValueOf(cfg).Elem(), EnvPrefix, env, &errs)
	return errors.Join(errs...)
}

var durationType = reflect.TypeOf(time.Duration(0))

func walkEnv(v reflect.Value, name string, env func(string) (string, bool), errs *[]error) {
	switch v.Kind() {
	case reflect.Pointer: // an optional section (compact.iceberg): overridable once present in the file
		if !v.IsNil() && v.Elem().Kind() == reflect.Struct {
			walkEnv(v.Elem(), name, env, errs)
			return
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "-" {
				continue
			}
			if strings.Contains(opts, "inline") {
				walkEnv(v.Field(i), name, env, errs)
				continue
			}
			if tag == "" {
				tag = strings.ToLower(f.Name)
			}
			walkEnv(v.Field(i), name+"_"+strings.ToUpper(tag), env, errs)
		}
		return
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := 0; i < v.Len(); i++ {
				el := v.Index(i)
				walkEnv(el, name+"_"+strconv.Itoa(i), env, errs)
				if n := el.FieldByName("Name"); n.IsValid() && n.Kind() == reflect.String && n.String() != "" {
					key := strings.ToUpper(strings.ReplaceAll(n.String(), "-", "_"))
					walkEnv(el, name+"_"+key, env, errs)
				}
			}
			return
		}
	}
	s, ok := env(name)
	if !ok {
		return
	}
	if err := setFromString(v, s); err != nil {
		*errs = append(*errs, fmt.Errorf("environment %s=%q: %w", name, s, err))
	}
}

func setFromString(v reflect.Value, s string) error {
	if v.Type() == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("cannot set a %s from the environment", v.Type())
		}
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("cannot set a %s from the environment", v.Type())
	}
	return nil
}
