// Package testregistry is the Schema Registry side of the tests and
// benchmarks. StartApicurio and SharedApicurio run Apicurio Registry, a
// real registry server, on 127.0.0.1 ports they pick; Produce runs
// Confluent's Python serializers against a registry (both installed by
// scripts/install-schema-registry), so that the messages a test reads are
// the wire format production producers write.
//
// Start serves a registry in Go: the part of Confluent's REST API that
// producers' serializers and consumers' deserializers use (register a
// schema under a subject, look one up by id or version), with optional
// basic or bearer auth and a switch that makes it answer 503 as a
// registry that is down does. Tests use it for what Apicurio cannot be
// made to do in a test (be down on demand, check credentials without an
// identity server) and where a test must count or hold lookups. It keeps
// the API's semantics that matter to a consumer: ids are global and
// stable, the same schema registered again keeps its id, an unknown id is
// 404 with error code 40403.
package testregistry

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// Options are the credentials the registry requires (none when empty).
type Options struct {
	Username, Password string
	Token              string
}

// Registry is a running registry.
type Registry struct {
	// URL is its base URL, http://127.0.0.1:port.
	URL  string
	opts Options
	srv  *http.Server

	down atomic.Bool
	// BeforeSchemaByID, when set, runs before GET /schemas/ids/{id} is
	// answered (tests hold a lookup there).
	BeforeSchemaByID func(id int)

	mu       sync.Mutex
	schemas  []Schema         // schemas[id-1]
	subjects map[string][]int // subject's versions: versions[v-1] is an id
	byID     map[int]int      // GET /schemas/ids/{id} requests per id
}

// Schema is a registered schema as the API shows it.
type Schema struct {
	Schema     string `json:"schema"`
	SchemaType string `json:"schemaType,omitempty"` // "" is AVRO
}

// Start serves a registry on a 127.0.0.1 port the system picks.
func Start(o Options) (*Registry, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testregistry: listen: %w", err)
	}
	r := &Registry{URL: "http://" + ln.Addr().String(), opts: o, subjects: map[string][]int{}, byID: map[int]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /subjects/{subject}/versions", r.register)
	mux.HandleFunc("POST /subjects/{subject}", r.lookup)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}", r.version)
	mux.HandleFunc("GET /schemas/ids/{id}", r.schemaByID)
	r.srv = &http.Server{Handler: r.guard(mux)}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops the registry.
func (r *Registry) Close() { _ = r.srv.Close() }

// SetDown makes every request answer 503 (true) or be served (false).
func (r *Registry) SetDown(down bool) { r.down.Store(down) }

// Lookups is how many times schema id was asked for by id.
func (r *Registry) Lookups(id int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

// Register registers a schema under subject (as a serializer with
// auto-registration does) and returns its id.
func (r *Registry) Register(subject string, s Schema) int {
	if s.SchemaType == "AVRO" {
		s.SchemaType = ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id := 0
	for i, have := range r.schemas {
		if have == s {
			id = i + 1
			break
		}
	}
	if id == 0 {
		r.schemas = append(r.schemas, s)
		id = len(r.schemas)
	}
	for _, v := range r.subjects[subject] {
		if v == id {
			return id
		}
	}
	r.subjects[subject] = append(r.subjects[subject], id)
	return id
}

func (r *Registry) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.down.Load() {
			fail(w, http.StatusServiceUnavailable, 50301, "the registry is down (testregistry.SetDown)")
			return
		}
		if !r.authorized(req) {
			fail(w, http.StatusUnauthorized, 40101, "unauthorized")
			return
		}
		h.ServeHTTP(w, req)
	})
}

func (r *Registry) authorized(req *http.Request) bool {
	switch {
	case r.opts.Token != "":
		return req.Header.Get("Authorization") == "Bearer "+r.opts.Token
	case r.opts.Username != "":
		u, p, ok := req.BasicAuth()
		return ok && u == r.opts.Username && p == r.opts.Password
	}
	return true
}

type registerRequest struct {
	Schema     string            `json:"schema"`
	SchemaType string            `json:"schemaType"`
	References []json.RawMessage `json:"references"`
}

func (r *Registry) register(w http.ResponseWriter, req *http.Request) {
	var in registerRequest
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		fail(w, http.StatusUnprocessableEntity, 42201, "invalid schema: "+err.Error())
		return
	}
	if len(in.References) > 0 {
		fail(w, http.StatusUnprocessableEntity, 42201, "references are not supported by testregistry")
		return
	}
	id := r.Register(req.PathValue("subject"), Schema{Schema: in.Schema, SchemaType: in.SchemaType})
	reply(w, map[string]any{"id": id})
}

// lookup answers whether a schema is registered under a subject.
func (r *Registry) lookup(w http.ResponseWriter, req *http.Request) {
	var in registerRequest
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		fail(w, http.StatusUnprocessableEntity, 42201, "invalid schema: "+err.Error())
		return
	}
	s := Schema{Schema: in.Schema, SchemaType: in.SchemaType}
	if s.SchemaType == "AVRO" {
		s.SchemaType = ""
	}
	subject := req.PathValue("subject")
	r.mu.Lock()
	defer r.mu.Unlock()
	for v, id := range r.subjects[subject] {
		if r.schemas[id-1] == s {
			reply(w, r.versionReply(subject, v+1, id))
			return
		}
	}
	fail(w, http.StatusNotFound, 40403, "schema not found")
}

func (r *Registry) version(w http.ResponseWriter, req *http.Request) {
	subject := req.PathValue("subject")
	r.mu.Lock()
	defer r.mu.Unlock()
	versions := r.subjects[subject]
	if len(versions) == 0 {
		fail(w, http.StatusNotFound, 40401, "subject not found")
		return
	}
	v := len(versions)
	if s := req.PathValue("version"); s != "latest" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > len(versions) {
			fail(w, http.StatusNotFound, 40402, "version not found")
			return
		}
		v = n
	}
	reply(w, r.versionReply(subject, v, versions[v-1]))
}

// versionReply is a subject version's JSON. REQUIRES: r.mu held.
func (r *Registry) versionReply(subject string, version, id int) map[string]any {
	s := r.schemas[id-1]
	m := map[string]any{"subject": subject, "version": version, "id": id, "schema": s.Schema}
	if s.SchemaType != "" {
		m["schemaType"] = s.SchemaType
	}
	return m
}

func (r *Registry) schemaByID(w http.ResponseWriter, req *http.Request) {
	id, err := strconv.Atoi(req.PathValue("id"))
	if r.BeforeSchemaByID != nil {
		r.BeforeSchemaByID(id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID[id]++
	if err != nil || id < 1 || id > len(r.schemas) {
		fail(w, http.StatusNotFound, 40403, "Schema "+req.PathValue("id")+" not found")
		return
	}
	reply(w, r.schemas[id-1])
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": code, "message": msg})
}
