package compute

import (
	"errors"
	"strings"
	"testing"
)

// TestPluginsNeedEnablePlugins: in a binary that never called
// EnablePlugins (the lean sluice, which does not link package plugin), a
// plugin column is a load error naming the plugin and ErrNoPlugins; with it,
// the same plugin loads.
func TestPluginsNeedEnablePlugins(t *testing.T) {
	path := testPluginPath(t)
	open := pluginOpener.Swap(nil)
	_, err := NewPlugin("Upper").Load(path)
	pluginOpener.Store(open)
	if !errors.Is(err, ErrNoPlugins) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Load without EnablePlugins: %v, want ErrNoPlugins naming %s", err, path)
	}
	if _, err := NewPlugin("Upper").Load(path); err != nil {
		t.Fatalf("Load after EnablePlugins: %v", err)
	}
}
