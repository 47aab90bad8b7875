package config

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDescribesOnly: config describes and validates the YAML; it runs
// nothing, so of sluice it links the leaves that describe values at most:
// coltype, computeopt and internal/secret (docs/architecture.md).
// Reading a config must not link the Lua VMs (compute, luavm, luajit) or
// the RDB tools (rdb, rdbtool): the packages that run a config own their
// options, and the server translates (server/options.go).
func TestDescribesOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/sluicedb/sluice"
	allowed := map[string]bool{module + "/config": true, module + "/coltype": true, module + "/computeopt": true, module + "/internal/secret": true}
	for _, p := range strings.Fields(string(out)) {
		if (p == module || strings.HasPrefix(p, module+"/")) && !allowed[p] {
			t.Errorf("config links %s: only coltype, computeopt and internal/secret of sluice are allowed", p)
		}
	}
}
