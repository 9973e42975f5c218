//go:build !race

package okx_test

const raceEnabled = false
