package pgtest_test

import (
	"context"
	"errors"
	"github.com/sluicedb/sluice/internal/testenv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/sluicedb/sluice/internal/pgtest"
)

// TestServer starts a server, creates a database, and checks that TCP
// logins need the role's password (the catalog tests rely on it to show
// where credentials come from).
func TestServer(t *testing.T) {
	ctx := context.Background()
	s, err := pgtest.Start(ctx)
	if err != nil {
		if errors.Is(err, pgtest.ErrMissing) {
			testenv.Missing(t, "%v", err)
		}
		t.Fatal(err)
	}
	defer s.Stop()
	url, err := s.CreateDatabase(ctx, "helper")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var who, db string
	if err := conn.QueryRow(ctx, "SELECT current_user, current_database()").Scan(&who, &db); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if who != pgtest.User || db != "helper" {
		t.Errorf("connected as %s to %s", who, db)
	}
	wrong := strings.Replace(url, pgtest.Password, "wrong", 1)
	if conn, err := pgx.Connect(ctx, wrong); err == nil {
		conn.Close(ctx)
		t.Error("a wrong password logged in: TCP connections are not authenticated")
	} else if !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("wrong password: %v", err)
	}
}
