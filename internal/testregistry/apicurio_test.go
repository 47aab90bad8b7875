package testregistry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

var shared SharedApicurio

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

// TestApicurioNotInstalled: with no install, StartApicurio says so with
// ErrNoApicurio (which SharedApicurio turns into a CI failure or a skip)
// at once, starting nothing.
func TestApicurioNotInstalled(t *testing.T) {
	t.Setenv("SLUICE_CACHE_DIR", t.TempDir())
	_, err := StartApicurio(context.Background(), t.TempDir())
	if !errors.Is(err, ErrNoApicurio) {
		t.Fatalf("StartApicurio without an install: %v, want ErrNoApicurio", err)
	}
}

// TestApicurioConfluentAPI: the registry StartApicurio runs answers
// Confluent's API as serializers and sluice use it (register, a subject's
// version with its id, a schema by id, 404 with 40403 for an unknown id),
// and Requests counts the GETs of one path from a mark, not those of a
// path it prefixes.
func TestApicurioConfluentAPI(t *testing.T) {
	a := shared.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	subject := fmt.Sprintf("api-%d-value", time.Now().UnixNano())
	body := `{"schema":"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"long\"}]}"}`
	resp, err := http.Post(a.URL+"/subjects/"+subject+"/versions", "application/vnd.schemaregistry.v1+json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("register: %s", resp.Status)
	}
	id, err := a.SchemaID(ctx, subject, 1)
	if err != nil || id < 1 {
		t.Fatalf("SchemaID: %d, %v", id, err)
	}
	mark := a.LogSize()
	get := func(path string) int {
		t.Helper()
		resp, err := http.Get(a.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 2 {
		if code := get(fmt.Sprintf("/schemas/ids/%d", id)); code != http.StatusOK {
			t.Fatalf("schema %d by id: %d", id, code)
		}
	}
	unknown := id*10 + 7 // never given here, and the path has id's as a prefix
	if code := get(fmt.Sprintf("/schemas/ids/%d", unknown)); code != http.StatusNotFound {
		t.Fatalf("unknown schema %d: %d, want 404", unknown, code)
	}
	// The access log is written as requests end: wait for the third line.
	deadline := time.Now().Add(10 * time.Second)
	for a.Requests(mark, fmt.Sprintf("/schemas/ids/%d", unknown)) < 1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := a.Requests(mark, fmt.Sprintf("/schemas/ids/%d", id)); n != 2 {
		t.Errorf("Requests of schema %d: %d, want 2:\n%s", id, n, a.Log())
	}
	if n := a.Requests(a.LogSize(), fmt.Sprintf("/schemas/ids/%d", id)); n != 0 {
		t.Errorf("Requests from a mark after them: %d, want 0", n)
	}
}
