//go:build race

package jsonw

const raceEnabled = true
