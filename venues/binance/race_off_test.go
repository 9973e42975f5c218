//go:build !race

package binance_test

const raceEnabled = false
