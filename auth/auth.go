// Package auth decides who a request comes from and what it may do:
// principals and their grants (ingest and query per table, admin, member,
// metrics), bearer tokens kept as SHA-256 hashes (in the config or a file
// reloaded when it changes), identities from verified client certificates,
// and the signature with which cluster members prove who they are (an
// HMAC-SHA256 over the request under a shared secret, within a bounded
// clock skew, each signature accepted once).
//
// It imports nothing of sluice: the server translates its config into
// Options and asks Authenticate per request.
package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Permission is what a route needs.
type Permission uint8

// The permissions. Ingest and Query are per table; the others are not.
const (
	// Ingest writes rows to a table.
	Ingest Permission = iota + 1
	// Query reads a table (queries, describes, read leases).
	Query
	// Admin runs maintenance: compaction, orphan cleanup, Iceberg
	// maintenance, pprof. It includes Metrics.
	Admin
	// Member is a cluster member's: the cold-tier holds of cluster
	// queries and leases, holdings reports.
	Member
	// Metrics reads /metrics.
	Metrics
)

var permissionNames = map[Permission]string{Ingest: "ingest", Query: "query", Admin: "admin", Member: "member", Metrics: "metrics"}

func (p Permission) String() string {
	if n, ok := permissionNames[p]; ok {
		return n
	}
	return fmt.Sprintf("permission(%d)", uint8(p))
}

// PerTable reports whether p is granted per table.
func (p Permission) PerTable() bool { return p == Ingest || p == Query }

// AnyTable, as a grant's table, is every table.
const AnyTable = "*"

// Grant is one permission, on one table or AnyTable for the per-table
// ones.
type Grant struct {
	Permission Permission
	Table      string // "" unless Permission.PerTable()
}

func (g Grant) String() string {
	if g.Table == "" {
		return g.Permission.String()
	}
	return g.Permission.String() + ":" + g.Table
}

// ErrBadRole is wrapped by ParseRole's errors.
var ErrBadRole = errors.New("bad role")

// ParseRole parses a role as the config writes it: "ingest:events",
// "query:*", "admin", "member", "metrics". A per-table permission needs its
// table (or *): a grant of every table is written, never implied.
func ParseRole(s string) (Grant, error) {
	name, table, hasTable := strings.Cut(s, ":")
	var p Permission
	for k, n := range permissionNames {
		if n == name {
			p = k
		}
	}
	switch {
	case p == 0:
		return Grant{}, fmt.Errorf("%w %q: want ingest:TABLE, query:TABLE (TABLE may be *), admin or metrics", ErrBadRole, s)
	case p.PerTable() && (!hasTable || table == ""):
		return Grant{}, fmt.Errorf("%w %q: %s needs a table: %s:TABLE or %s:*", ErrBadRole, s, name, name, name)
	case !p.PerTable() && hasTable:
		return Grant{}, fmt.Errorf("%w %q: %s is not per table", ErrBadRole, s, name)
	}
	return Grant{Permission: p, Table: table}, nil
}

// ErrMemberRole: member is not a role to configure. A member proves
// itself with the cluster secret, which also names its node: a token or
// certificate with member could hold every node's commits in no node's
// name.
var ErrMemberRole = errors.New("member is proven with the cluster secret, not granted to a token or certificate")

// ParseRoles parses the roles of a token or certificate, reporting every
// bad one (member among them: ErrMemberRole).
func ParseRoles(roles []string) ([]Grant, error) {
	var grants []Grant
	var errs []error
	for _, r := range roles {
		g, err := ParseRole(r)
		if err == nil && g.Permission == Member {
			err = fmt.Errorf("%w %q: %w", ErrBadRole, r, ErrMemberRole)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		grants = append(grants, g)
	}
	return grants, errors.Join(errs...)
}

// Principal is who a request comes from.
type Principal struct {
	// Name identifies it in the audit log: the token's or certificate
	// identity's configured name, "member:<node id>" for a member.
	Name string
	// Via is how it proved it: "token", "certificate", "member".
	Via    string
	Grants []Grant
}

// Anonymous is the principal of a request without credentials.
var Anonymous = &Principal{Name: "anonymous", Via: "none"}

// MemberName is the principal name of the member with node id node.
func MemberName(node string) string { return "member:" + node }

// Node is the node id of a member principal, "" for any other.
func (p *Principal) Node() string {
	if p.Via != "member" {
		return ""
	}
	return strings.TrimPrefix(p.Name, "member:")
}

// Allowed reports whether p has perm on table. For a per-table permission
// an empty table means "some table" (the list of tables, the cluster's
// members: a reader of any table may see them).
func (p *Principal) Allowed(perm Permission, table string) bool {
	return slices.ContainsFunc(p.Grants, func(g Grant) bool {
		switch {
		case g.Permission == Admin && perm == Metrics:
			return true
		case g.Permission != perm:
			return false
		case !perm.PerTable():
			return true
		}
		return table == "" || g.Table == AnyTable || g.Table == table
	})
}
