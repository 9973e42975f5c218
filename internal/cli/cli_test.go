package cli

import (
	"flag"
	"io"
	"slices"
	"testing"
)

// TestParseArgs: flags before, between and after the other arguments;
// after "--" nothing is a flag; list flags accumulate either way.
func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		pos     []string
		streams []string
		loop    bool
	}{
		{[]string{"a", "--loop", "b", "--streams", "x,y"}, []string{"a", "b"}, []string{"x", "y"}, true},
		{[]string{"--streams", "x", "a", "--streams", "y"}, []string{"a"}, []string{"x", "y"}, false},
		{[]string{"a", "--", "--loop"}, []string{"a", "--loop"}, nil, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		loop := fs.Bool("loop", false, "")
		var streams ListFlag
		fs.Var(&streams, "streams", "")
		pos, err := ParseArgs(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || !slices.Equal(streams, tc.streams) || *loop != tc.loop {
			t.Errorf("%v: %v %v %v %v", tc.args, pos, streams, *loop, err)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := ParseArgs(fs, []string{"a", "--nope"}); err == nil {
		t.Fatal("an unknown flag after an argument was accepted")
	}
}
