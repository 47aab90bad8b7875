//go:build !race

package coldtier_test

const raceEnabled = false
