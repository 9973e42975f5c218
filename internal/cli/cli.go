// Package cli holds the command-line grammar every fanoutd command shares:
// flags before or after the other arguments, list flags that repeat.
package cli

import (
	"flag"
	"strings"
)

// ListFlag is a flag that may be given several times and whose values may
// be comma-separated: --streams A,B and --streams A --streams B both give
// [A B].
type ListFlag []string

func (l *ListFlag) String() string { return strings.Join(*l, ",") }

func (l *ListFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// ParseArgs parses args with fs, flags before, between or after the
// positional arguments (replay cap.gz --export -), and returns the
// positional ones. After "--" every argument is positional.
func ParseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}
