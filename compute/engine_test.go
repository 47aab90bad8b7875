package compute

import (
	"strings"
	"testing"
)

func TestEngineUnknownIsAConfigError(t *testing.T) {
	_, err := ParseConfig([]byte(`
computed:
  - name: c
    type: string
    engine: luajt
    func: "function main(row) return 'x' end"
`))
	if err == nil || !strings.Contains(err.Error(), `unknown engine "luajt"`) {
		t.Errorf("ParseConfig: %v", err)
	}
}
