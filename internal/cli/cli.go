// Package cli holds the command-line grammar every fanoutd command shares:
// flags before or after the other arguments, list flags that repeat and
// take several values.
package cli

import (
	"flag"
	"strings"
)

// ListFlag is a flag that may be given several times and whose values may
// be comma-separated: --streams A,B and --streams A --streams B both give
// [A B]. Registered with Several, it also takes the arguments after its
// value: --streams A B.
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

// several is a ListFlag that ParseArgs gives the arguments after its
// value, up to the next flag, while more accepts them.
type several struct {
	*ListFlag
	more func(arg string) bool
}

func (s several) String() string {
	if s.ListFlag == nil { // the flag package's zero value, for help
		return ""
	}
	return s.ListFlag.String()
}

// Several registers l as the list flag name on fs: repeated, comma-separated
// and, as ParseArgs reads it, several values after one flag (--streams A B
// C), up to the next flag or the first argument more refuses (nil: none is
// refused). more keeps the command's other arguments apart: replay's
// captures end its --streams.
func Several(fs *flag.FlagSet, l *ListFlag, name, usage string, more func(arg string) bool) {
	if more == nil {
		more = func(string) bool { return true }
	}
	fs.Var(several{l, more}, name, usage)
}

// ParseArgs parses args with fs, flags before, between or after the
// positional arguments (replay cap.gz --export -), and returns the
// positional ones. After "--" every argument is positional. The arguments
// after a Several flag's value are its values while it accepts them.
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
		n := len(args) - len(rest)
		if n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if s, ok := lastSeveral(fs, args[:n]); ok {
			for len(rest) > 0 && !isFlag(rest[0]) && s.more(rest[0]) {
				if err := s.Set(rest[0]); err != nil {
					return nil, err
				}
				rest = rest[1:]
			}
			if len(rest) == 0 || isFlag(rest[0]) {
				args = rest
				continue
			}
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// isFlag reports whether arg is a flag for the flag package ("-" alone is
// an argument: stdout, stdin).
func isFlag(arg string) bool { return len(arg) > 1 && arg[0] == '-' }

// lastSeveral returns the Several flag that the last of the parsed
// arguments gave a value to, if it was one.
func lastSeveral(fs *flag.FlagSet, parsed []string) (several, bool) {
	n := len(parsed)
	if n == 0 {
		return several{}, false
	}
	name, ok := "", false
	if t := parsed[n-1]; isFlag(t) {
		if i := strings.IndexByte(t, '='); i >= 0 { // --streams=A
			name, ok = strings.TrimLeft(t[:i], "-"), true
		}
	} else if n >= 2 && isFlag(parsed[n-2]) && !strings.Contains(parsed[n-2], "=") { // --streams A
		name, ok = strings.TrimLeft(parsed[n-2], "-"), true
	}
	if !ok {
		return several{}, false
	}
	f := fs.Lookup(name)
	if f == nil {
		return several{}, false
	}
	s, ok := f.Value.(several)
	return s, ok
}
