package compute

import (
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/compute/goplugin"
	"github.com/sluicedb/sluice/compute/plugbuild"
	"github.com/sluicedb/sluice/internal/testenv"
)

var testDir string

func TestMain(m *testing.M) {
	// A plugin check child opens its plugin and exits here; otherwise this
	// test binary serves the checks of the tests' plugin loads.
	EnablePlugins(goplugin.Open)
	ServePluginCheck()
	var err error
	testDir, err = os.MkdirTemp("", "compute-test-")
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(testDir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// testPluginSource exports one function per case the loader must handle.
const testPluginSource = `package main

import (
	"errors"
	"strings"
)

func Upper(row map[string]interface{}) (interface{}, error) {
	s, ok := row["name"].(string)
	if !ok {
		return nil, errors.New("name is not a string")
	}
	return strings.ToUpper(s), nil
}

func Len(row map[string]interface{}) (interface{}, error) { return int64(len(row)), nil }

func Keep(row map[string]interface{}) (interface{}, error) { return row["keep"] == true, nil }

func WrongType(row map[string]interface{}) (interface{}, error) { return struct{ X int }{1}, nil }

func Panics(row map[string]interface{}) (interface{}, error) {
	var m map[string]int
	m["boom"] = 1
	return nil, nil
}

func Trim(row map[string]interface{}) (interface{}, error) {
	for _, k := range []string{"key1", "key2", "key3", "key4", "key5"} {
		delete(row, k)
	}
	return nil, nil
}

func OtherSignature(s string) string { return s }

var Var = func(row map[string]interface{}) (interface{}, error) { return "from a var", nil }

var NilFunc func(map[string]interface{}) (interface{}, error)
`

var testPlugin struct {
	once sync.Once
	path string
	err  error
}

// testPluginPath builds testPluginSource once per test binary.
func testPluginPath(tb testing.TB) string {
	tb.Helper()
	testPlugin.once.Do(func() {
		testPlugin.path, testPlugin.err = plugbuild.BuildFile(testDir, "test.so", testPluginSource)
	})
	if testPlugin.err != nil {
		if _, err := plugbuild.Check(); err != nil {
			testenv.Require(tb, err) // fails under CI=true, skips otherwise
		}
		tb.Fatal(testPlugin.err)
	}
	return testPlugin.path
}
