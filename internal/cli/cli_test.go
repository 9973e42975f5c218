package cli

import (
	"flag"
	"io"
	"slices"
	"strings"
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

// TestSeveralValues: a Several flag takes the arguments after its value up
// to the next flag, or to one it refuses; repeated and comma-separated
// values accumulate with them; "--" still ends the flags.
func TestSeveralValues(t *testing.T) {
	notCapture := func(a string) bool { return !strings.HasSuffix(a, ".gz") }
	for _, tc := range []struct {
		args    []string
		pos     []string
		streams []string
		loop    bool
	}{
		{[]string{"--streams", "A", "B", "C"}, nil, []string{"A", "B", "C"}, false},
		{[]string{"--streams", "A", "B", "cap.gz"}, []string{"cap.gz"}, []string{"A", "B"}, false},
		{[]string{"cap.gz", "--streams", "A", "B", "--loop", "x.gz"}, []string{"cap.gz", "x.gz"}, []string{"A", "B"}, true},
		{[]string{"--streams", "A,B", "C", "--streams", "D", "E"}, nil, []string{"A", "B", "C", "D", "E"}, false},
		{[]string{"--streams=A", "B", "--loop"}, nil, []string{"A", "B"}, true},
		{[]string{"--streams", "A", "--", "B"}, []string{"B"}, []string{"A"}, false},
		{[]string{"--loop", "y.gz", "--streams", "A"}, []string{"y.gz"}, []string{"A"}, true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		loop := fs.Bool("loop", false, "")
		var streams ListFlag
		Several(fs, &streams, "streams", "", notCapture)
		pos, err := ParseArgs(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || !slices.Equal(streams, tc.streams) || *loop != tc.loop {
			t.Errorf("%v: pos %v streams %v loop %v err %v; want %v %v %v", tc.args, pos, streams, *loop, err, tc.pos, tc.streams, tc.loop)
		}
	}
	// The flag's help prints (the zero value's String is asked for).
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var b strings.Builder
	fs.SetOutput(&b)
	var l ListFlag
	Several(fs, &l, "streams", "streams", nil)
	fs.PrintDefaults()
	if !strings.Contains(b.String(), "-streams") {
		t.Fatalf("help: %q", b.String())
	}
}
