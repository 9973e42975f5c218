// Command fanoutd-bench is fanoutd's load harness and soak, kept out of the
// production binary:
//
//	fanoutd-bench [bench] [--subs N] [--rate R] [--size B] [--duration D] [--io-uring=false] [--source inproc|venue] [--peer centrifugo] [--edges N]
//	fanoutd-bench soak [--duration D] [--subs N] [--drop-every D] [--speed N] [CAPTURE…]
//	fanoutd-bench help
//
// bench is the default command. `fanoutd-bench bench --edges N` runs its
// edges as `fanoutd serve` processes: the fanoutd binary named by
// FANOUTD_BIN, else the one beside this executable, else fanoutd on PATH.
// The harness starts this binary again for its children (bench-clients,
// bench-venue, soak-clients), which are not for direct use.
// Exit codes: 0 success, 1 a failed run or check, 2 bad usage.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/fanoutd/fanoutd/internal/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: fanoutd-bench [COMMAND] [FLAGS] [ARGS]

commands:
  bench   load harness: server CPU per delivered message, latency (the default)
  soak    a looped replay to many subscribers; exits 1 on a leak or a loss
  help    this list

'fanoutd-bench COMMAND --help' lists a command's flags.
Documentation: docs/performance.md and docs/development.md.
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "bench"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "bench":
		return bench.Main(args, stdout, stderr)
	case "soak":
		return bench.Soak(args, stdout, stderr)
	// The harness's children: this binary, started again.
	case "bench-clients":
		return bench.Clients(args, stdout, stderr)
	case "bench-venue":
		return bench.VenueMain(args, stdin, stdout, stderr)
	case "soak-clients":
		return bench.SoakClients(args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "fanoutd-bench: unknown command %q (want bench, soak or help)\n", cmd)
		return 2
	}
}
