package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A token is 32 random bytes: with 256 bits of entropy nobody guesses one
// or inverts its SHA-256, so a fast hash is enough. A slow password hash
// (bcrypt, argon2) protects low-entropy secrets people choose and would
// cost milliseconds on every request.
const (
	tokenPrefix = "sluice_"
	hashPrefix  = "sha256:"
	tokenBytes  = 32
)

// TokenEntry is one token as the config and the tokens file list it: its
// hash, never the token.
type TokenEntry struct {
	Name  string   `yaml:"name"`
	Hash  string   `yaml:"hash"`
	Roles []string `yaml:"roles"`
}

// TokensFile is the tokens file's shape.
type TokensFile struct {
	Tokens []TokenEntry `yaml:"tokens"`
}

// NewToken returns a new random token and its hash, as a TokenEntry's Hash.
func NewToken() (token, hash string, err error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("auth: new token: %w", err)
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token), nil
}

// HashToken is the hash of token as a TokenEntry's Hash.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// ErrBadHash is wrapped by the error of a hash that is not sha256:<64 hex>.
var ErrBadHash = errors.New("bad token hash")

func parseHash(h string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	hx, ok := strings.CutPrefix(h, hashPrefix)
	if !ok || len(hx) != 2*sha256.Size {
		return sum, fmt.Errorf("%w: want sha256: and 64 hex digits (sluice auth token prints one)", ErrBadHash)
	}
	if _, err := hex.Decode(sum[:], []byte(hx)); err != nil {
		return sum, fmt.Errorf("%w: want sha256: and 64 hex digits", ErrBadHash)
	}
	return sum, nil
}

// token is a TokenEntry ready to check.
type token struct {
	sum       [sha256.Size]byte
	principal *Principal
}

// compileTokens checks entries (where names them in errors) and makes
// them checkable. Errors never quote a hash.
func compileTokens(entries []TokenEntry, where string) ([]token, error) {
	var out []token
	var errs []error
	names := map[string]bool{}
	for i, e := range entries {
		at := fmt.Sprintf("%s[%d] %q", where, i, e.Name)
		if e.Name == "" {
			errs = append(errs, fmt.Errorf("%s: no name", at))
		} else if names[e.Name] {
			errs = append(errs, fmt.Errorf("%s: the name is taken by another token", at))
		}
		names[e.Name] = true
		sum, err := parseHash(e.Hash)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: hash: %w", at, err))
		}
		if len(e.Roles) == 0 {
			errs = append(errs, fmt.Errorf("%s: no roles", at))
		}
		grants, err := ParseRoles(e.Roles)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
		out = append(out, token{sum: sum, principal: &Principal{Name: e.Name, Via: "token", Grants: grants}})
	}
	return out, errors.Join(errs...)
}

// readTokensFile reads and checks the tokens file at path.
func readTokensFile(path string) ([]token, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: tokens file: %w", err)
	}
	var f TokensFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		// yaml's errors quote the line at fault, which may hold a hash: say
		// only where.
		return nil, fmt.Errorf("auth: tokens file %s: not a tokens list (tokens: [{name, hash, roles}])", path)
	}
	toks, err := compileTokens(f.Tokens, "tokens file "+path+": tokens")
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return toks, nil
}

// matchToken is the principal of the token whose hash is sum. Every entry
// is compared, in constant time each, whatever matches: the time taken
// says nothing of which token (or how much of a hash) matched.
func matchToken(toks []token, sum [sha256.Size]byte) *Principal {
	var found *Principal
	for i := range toks {
		if subtle.ConstantTimeCompare(toks[i].sum[:], sum[:]) == 1 {
			found = toks[i].principal
		}
	}
	return found
}
