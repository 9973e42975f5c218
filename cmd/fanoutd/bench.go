package main

import (
	"fmt"
	"io"
)

func bench(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "fanoutd bench: not yet")
	return 2
}

func benchClients(args []string, stdout, stderr io.Writer) int { return 2 }
