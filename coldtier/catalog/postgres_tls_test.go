package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/coldtier/catalog"
	"github.com/sluicedb/sluice/internal/pgtest"
	"github.com/sluicedb/sluice/internal/testcert"
	"github.com/sluicedb/sluice/internal/testenv"
)

// TestPostgresCatalogTLS: a SQL catalog on a PostgreSQL server that speaks
// TLS with a test CA's certificate opens with sslmode=verify-full, the CA
// as sslrootcert and the password given apart (Config.Password); it is
// refused, with a cause that names the certificate, when the CA did not
// sign the server's certificate; a password both in the uri and apart is
// refused; a wrong password fails without being quoted.
func TestPostgresCatalogTLS(t *testing.T) {
	certs, err := testcert.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := pgtest.StartWith(ctx, pgtest.Options{CertFile: certs.ServerCertFile, KeyFile: certs.ServerKeyFile})
	if errors.Is(err, pgtest.ErrMissing) {
		testenv.Missing(t, "PostgreSQL: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if _, err := srv.CreateDatabase(ctx, "iceberg"); err != nil {
		t.Fatal(err)
	}
	password := func(pw string) func() (string, error) { return func() (string, error) { return pw, nil } }
	open := func(ca, userinfo string, pw func() (string, error)) error {
		l := catalog.Location{Warehouse: t.TempDir(), Catalog: catalog.Config{Type: "sql", Password: pw,
			URI: fmt.Sprintf("postgres://%s@%s:%d/iceberg?sslmode=verify-full&sslrootcert=%s&connect_timeout=10", userinfo, srv.Host, srv.Port, ca)}}
		if err := l.Defaults(t.TempDir()); err != nil {
			return err
		}
		cat, err := catalog.Open(ctx, l, nil)
		if err == nil {
			if c, ok := cat.(interface{ Close() error }); ok {
				c.Close()
			}
		}
		return err
	}
	if err := open(certs.CAFile, pgtest.User, password(pgtest.Password)); err != nil {
		t.Fatalf("verify-full with the right CA and the password apart: %v", err)
	}
	if err := open(certs.OtherCAFile, pgtest.User, password(pgtest.Password)); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("a CA that did not sign the server's certificate: %v", err)
	}
	if err := open(certs.CAFile, pgtest.User+":"+pgtest.Password, password(pgtest.Password)); !errors.Is(err, catalog.ErrCatalogURI) {
		t.Errorf("a password in the uri and apart: %v, want ErrCatalogURI", err)
	}
	const wrong = "not-the-pg-Pa55word"
	err = open(certs.CAFile, pgtest.User, password(wrong))
	if err == nil || strings.Contains(err.Error(), wrong) {
		t.Errorf("a wrong password: %v (want an error that does not quote it)", err)
	}
	if log, _ := os.ReadFile(srv.Log); strings.Contains(string(log), wrong) {
		t.Errorf("the server's log holds the password")
	}
}
