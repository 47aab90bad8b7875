// Package archtest holds tests that keep the repository's documents true to
// its code: the layers of docs/architecture.md (which of sluice's packages
// each package may import) and the reference pages of docs/reference (every
// config key, every HTTP route), and the docs' relative links. It has no
// product code; the documents are the lists the tests read, so a change of
// layers, keys or routes updates the page in the same commit or fails.
package archtest
