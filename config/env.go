package config

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
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
// It returns the variable names the config has (looked up or not).
func applyEnv(cfg *Config, env func(string) (string, bool)) (known map[string]bool, err error) {
	var errs []error
	known = map[string]bool{}
	lookup := func(name string) (string, bool) {
		known[name] = true
		return env(name)
	}
	walkEnv(reflect.ValueOf(cfg).Elem(), EnvPrefix, lookup, &errs)
	return known, errors.Join(errs...)
}

// notConfig are SLUICE_ variables that are not config overrides (the
// clients' token, the cluster secret, the test harness's and scripts').
var notConfig = []string{"SLUICE_TOKEN", "SLUICE_TEST_", "SLUICE_CACHE_DIR", "SLUICE_RDBGEN_", "SLUICE_BENCH_", "SLUICE_MEM_", SecretEnv}

// unknownEnv returns a warning for each SLUICE_ variable of environ
// ("NAME=value") that overrides nothing, with the nearest config variable
// when one is close (a typo).
func unknownEnv(environ []string, known map[string]bool) []string {
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix+"_") || known[name] {
			continue
		}
		skip := false
		for _, p := range notConfig {
			skip = skip || strings.HasPrefix(name, p)
		}
		if skip {
			continue
		}
		w := fmt.Sprintf("environment variable %s matches no config field and is ignored", name)
		best, bestDist := "", 4 // suggest names at most 3 edits away
		for k := range known {
			if d := editDistance(name, k); d < bestDist || d == bestDist && k < best {
				best, bestDist = k, d
			}
		}
		if best != "" {
			w += fmt.Sprintf(" (did you mean %s?)", best)
		}
		warnings = append(warnings, w)
	}
	sort.Strings(warnings)
	return warnings
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var durationType = reflect.TypeOf(time.Duration(0))

func walkEnv(v reflect.Value, name string, env func(string) (string, bool), errs *[]error) {
	switch v.Kind() {
	case reflect.Pointer: // an optional section (compact.iceberg, a source's kafka: or nats:): overridable once present in the file
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
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		switch v.Type().Elem().Kind() {
		case reflect.String:
			v.Set(reflect.ValueOf(parts))
		case reflect.Int: // a table's rdb.db
			ints := make([]int, len(parts))
			for i, p := range parts {
				n, err := strconv.Atoi(p)
				if err != nil {
					return err
				}
				ints[i] = n
			}
			v.Set(reflect.ValueOf(ints))
		default:
			return fmt.Errorf("cannot set a %s from the environment", v.Type())
		}
	default:
		return fmt.Errorf("cannot set a %s from the environment", v.Type())
	}
	return nil
}
