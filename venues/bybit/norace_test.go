//go:build !race

package bybit_test

const raceEnabled = false
