package cli

import (
	"strings"
	"testing"

	"github.com/sluicedb/sluice/auth"
	"github.com/sluicedb/sluice/config"
)

// TestAuthToken: the printed entry is valid config whose hash is the
// printed token's, and the roles are checked.
func TestAuthToken(t *testing.T) {
	out := runCmd(t, tokenCmd, "--name", "loader", "--role", "ingest:events", "--role", "query:*")
	ls := strings.Split(strings.TrimSpace(out), "\n")
	if len(ls) != 4 {
		t.Fatalf("output:\n%s", out)
	}
	token, entry := ls[1], ls[3]
	cfg, err := config.Parse([]byte("tables: [{name: events}]\nauth:\n  tokens:\n    "+entry+"\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("the printed entry %q: %v", entry, err)
	}
	got := cfg.Auth.Tokens[0]
	if got.Name != "loader" || got.Hash != auth.HashToken(token) || strings.Join(got.Roles, ",") != "ingest:events,query:*" {
		t.Errorf("entry %+v does not match token %q", got, token)
	}
	if strings.Contains(entry, token) {
		t.Error("the entry holds the token")
	}
	cmd := tokenCmd()
	cmd.SetArgs([]string{"--name", "x", "--role", "ingest"})
	cmd.SetOut(&strings.Builder{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "needs a table") {
		t.Errorf("a role without its table: %v", err)
	}
}
