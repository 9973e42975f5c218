//go:build !race

package kraken_test

const raceEnabled = false
