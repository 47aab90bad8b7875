package schemaformat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// maxReferenceDepth bounds a chain of references (a schema that references
// one that references another...): deeper than any hand-written schema
// set, shallow enough that a registry serving an endless chain cannot keep
// a partition busy.
const maxReferenceDepth = 16

// ErrReference: a schema's reference cannot be resolved (the registry has
// no such subject or version, or the references form a cycle or too deep
// a chain). The message is a dead letter: ErrReference wraps
// ErrUnknownSchema, which sources already sort. (A referenced schema that
// does not compile is ErrUnknownSchema naming the reference.)
var ErrReference = fmt.Errorf("%w: unresolved schema reference", ErrUnknownSchema)

// subjectVersion names one registered schema; a subject's version, like a
// schema id, never changes meaning, so the fetched text is kept for the
// process's life.
type subjectVersion struct {
	subject string
	version int
}

func (sv subjectVersion) String() string {
	return fmt.Sprintf("subject %q version %d", sv.subject, sv.version)
}

// reference is one resolved reference: the name the referencing schema
// uses for it (an Avro type's full name, a Protobuf import path, a JSON
// Schema $ref), the referenced schema, and what that schema references in
// turn.
type reference struct {
	name   string
	at     subjectVersion
	schema sr.Schema
	deps   []reference
}

// resolve fetches refs (the references of schema id) and theirs in turn,
// depth first. chain is the path of references that led here, for the
// cycle check and in the errors.
func (d *Decoder) resolve(ctx context.Context, id int, refs []sr.SchemaReference, chain []subjectVersion) ([]reference, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	if len(chain) >= maxReferenceDepth {
		return nil, fmt.Errorf("%w: schema id %d: references nested deeper than %d (%s)", ErrReference, id, maxReferenceDepth, chainText(chain))
	}
	out := make([]reference, 0, len(refs))
	for _, r := range refs {
		at := subjectVersion{subject: r.Subject, version: r.Version}
		for _, seen := range chain {
			if seen == at {
				return nil, fmt.Errorf("%w: schema id %d: reference %q: a cycle (%s -> %s)", ErrReference, id, r.Name, chainText(chain), at)
			}
		}
		s, err := d.referenced(ctx, id, r.Name, at)
		if err != nil {
			return nil, err
		}
		deps, err := d.resolve(ctx, id, s.References, append(chain[:len(chain):len(chain)], at))
		if err != nil {
			return nil, err
		}
		out = append(out, reference{name: r.Name, at: at, schema: s, deps: deps})
	}
	return out, nil
}

// referenced returns the schema of one reference, from the cache or the
// registry. A version below 1 (Confluent's -1, "latest") is asked each
// time: its meaning changes as the subject gets versions.
func (d *Decoder) referenced(ctx context.Context, id int, name string, at subjectVersion) (sr.Schema, error) {
	if at.version > 0 {
		d.mu.RLock()
		s, ok := d.references[at]
		d.mu.RUnlock()
		if ok {
			return s, nil
		}
	}
	d.lookups.Add(1)
	lctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	ss, err := d.client.SchemaByVersion(lctx, at.subject, at.version)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && (re.StatusCode == http.StatusNotFound || re.StatusCode == http.StatusUnprocessableEntity) {
			return sr.Schema{}, fmt.Errorf("%w: schema id %d: reference %q (%s): the registry answered %d: %s", ErrReference, id, name, at, re.StatusCode, re.Error())
		}
		return sr.Schema{}, fmt.Errorf("%w: looking up reference %q (%s) of schema id %d: %w", ErrUnavailable, name, at, id, err)
	}
	if at.version > 0 {
		d.mu.Lock()
		d.references[at] = ss.Schema
		d.mu.Unlock()
	}
	return ss.Schema, nil
}

func chainText(chain []subjectVersion) string {
	parts := make([]string, len(chain))
	for i, at := range chain {
		parts[i] = at.String()
	}
	return strings.Join(parts, " -> ")
}

// dependencyOrder is refs and theirs, each once (by subject and version),
// every schema after those it references: the order in which a parser
// that learns named types as it goes must see them.
func dependencyOrder(refs []reference) []reference {
	var out []reference
	seen := map[subjectVersion]bool{}
	var walk func([]reference)
	walk = func(rs []reference) {
		for _, r := range rs {
			if seen[r.at] {
				continue
			}
			seen[r.at] = true
			walk(r.deps)
			out = append(out, r)
		}
	}
	walk(refs)
	return out
}
