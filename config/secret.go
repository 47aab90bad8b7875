package config

import "github.com/sluicedb/sluice/internal/secret"

// Secret is a password, token or client secret that the config names
// rather than holds: {env: NAME}, {file: PATH} or, for tests, the value
// itself (package secret's Ref, which a computed column's s3 keys share
// with the rest of the config). It is read when it is used (Reveal), and
// no way of printing it shows the value.
type Secret = secret.Ref

// ErrSecretUnset is returned by Reveal for a secret that is not configured,
// whose variable is unset or empty, or whose file is empty.
var ErrSecretUnset = secret.ErrUnset
