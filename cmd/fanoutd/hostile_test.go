package main

// The hostile-clients suite's attacks on the command line: bad
// captures to replay and a YAML alias bomb to check-config. The attacks on
// a running daemon are in internal/daemon/hostile_test.go.

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestHostileCaptures (held): truncated and garbage captures to
// `replay --export`. Promise (docs/recording-and-replay.md): a capture that
// cannot be opened or names no venue exits 2 before anything starts; a
// malformed line stops the replay with FILE:LINE and exit 1; frames the
// venue's decoder refuses are data_quality notices, not a failure; never a
// panic.
func TestHostileCaptures(t *testing.T) {
	dir := t.TempDir()
	gz, err := os.ReadFile(capture("kraken"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gzipOf := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	lines := bytes.SplitAfter(plain, []byte("\n"))
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(i*7919 + i>>3)
	}
	ts := "2026-11-30T05:44:43.3693632Z "
	for _, tc := range []struct {
		name  string
		file  []byte
		venue bool // pass --venue kraken
		code  int
		want  string // in stderr; FILE stands for the path
	}{
		{"truncated.jsonl.gz", gz[:len(gz)/2], false, 1, "FILE"},
		{"header-only.jsonl.gz", gz[:10], false, 2, "FILE"},
		{"cut-in-header.jsonl.gz", gz[:5], false, 2, "FILE"},
		{"empty.jsonl.gz", nil, false, 2, "FILE"},
		{"empty.jsonl", nil, true, 0, ""},
		{"garbage.jsonl.gz", garbage, false, 2, "FILE"},
		{"garbage.jsonl", garbage, true, 1, "FILE:1:"},
		{"garbage-gzipped.jsonl.gz", gzipOf(garbage), true, 1, "FILE:1:"},
		{"nul.jsonl", make([]byte, 4096), true, 1, "FILE:1:"},
		{"cut-mid-line.jsonl", bytes.Join(lines[:len(lines)/2], nil)[:len(bytes.Join(lines[:len(lines)/2], nil))-40], true, 0, ""},
		{"cut-mid-timestamp.jsonl", append(bytes.Join(lines[:100], nil), lines[100][:10]...), true, 1, "FILE:101:"},
		{"no-timestamp.jsonl", append(bytes.Join(lines[:50], nil), []byte("{\"channel\":\"book\"}\n")...), true, 1, "FILE:51:"},
		{"bad-timestamp.jsonl", append(bytes.Join(lines[:50], nil), []byte("2026-13-45T99:99:99.9999999Z {}\n")...), true, 1, "FILE:51:"},
		{"garbage-frames.jsonl", append(bytes.Join(lines[:200], nil), []byte(ts+"{\"channel\":\"book\",\"type\":\"update\",\"data\":[{\"symbol\":\n"+ts+"\xff\xfe\x00\n"+ts+"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n")...), true, 0, ""},
		{"huge-line.jsonl", append(bytes.Join(lines[:50], nil), []byte(ts+`{"channel":"book","x":"`+strings.Repeat("A", 8<<20)+"\"}\n")...), true, 0, ""},
		{"time-backwards.jsonl", append(bytes.Join(lines[:50], nil), []byte("2020-01-01T00:00:00.0000000Z "+string(lines[50][29:]))...), true, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(tc.name, tc.file)
			args := []string{"replay", "--export", os.DevNull}
			if tc.venue {
				args = append(args, "--venue", "kraken")
			}
			var out, errb bytes.Buffer
			start := time.Now()
			code := run(append(args, p), &out, &errb)
			want := strings.ReplaceAll(tc.want, "FILE", p)
			if code != tc.code || !strings.Contains(errb.String(), want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errb.String(), tc.code, want)
			}
			if code != 0 && strings.Count(errb.String(), "\n") != 1 {
				t.Errorf("stderr is not one line: %q", errb.String())
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestHostileConfigAliasBomb (held): a YAML alias bomb ("billion laughs")
// and a deeply nested document to check-config. Promise: refused with exit
// 2 and a line per bad key, none twice however often the expansion repeats
// it, quickly, without the heap growing with the expansion.
func TestHostileConfigAliasBomb(t *testing.T) {
	var bomb strings.Builder
	bomb.WriteString("a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&bomb, "a%d: &a%d [*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	// The same expansion inside known keys, so that no unknown key stops
	// the decoding first: every token's streams refer to the previous one's.
	inTokens := "tokens:\n  - {name: t0, token: s0, streams: &s0 [\"coinbase:*\",\"coinbase:*\",\"coinbase:*\",\"coinbase:*\",\"coinbase:*\",\"coinbase:*\",\"coinbase:*\",\"coinbase:*\",\"coinbase:*\",\"coinbase:*\"]}\n"
	for i := 1; i < 10; i++ {
		inTokens += fmt.Sprintf("  - {name: t%d, token: s%d, streams: &s%d [*s%d, *s%d, *s%d, *s%d, *s%d, *s%d, *s%d, *s%d, *s%d, *s%d]}\n", i, i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	for _, tc := range []struct{ name, yaml string }{
		{"billion_laughs", bomb.String()},
		{"bomb_in_known_keys", inTokens},
		{"nested_10000", "listen: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "\n"},
		{"nested_maps", strings.Repeat("a: {", 5000) + strings.Repeat("}", 5000) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeConfig(t, tc.yaml)
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			var out, errb bytes.Buffer
			code := run([]string{"check-config", p}, &out, &errb)
			took := time.Since(start)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("exit %d in %v, %d bytes allocated: %s", code, took, alloc, strings.TrimSpace(errb.String()))
			lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
			seen := map[string]bool{}
			for _, l := range lines {
				if !strings.HasPrefix(l, "fanoutd: config: ") || seen[l] {
					t.Fatalf("exit %d, stderr %q; want 2 and a fanoutd: config: line per bad key, none twice", code, errb.String())
				}
				seen[l] = true
			}
			if code != 2 || len(lines) > 11 {
				t.Fatalf("exit %d, %d lines: %q; want 2 and at most the 10 keys of the document", code, len(lines), errb.String())
			}
			if took > 5*time.Second {
				t.Errorf("refused after %v", took)
			}
			if alloc > 256<<20 {
				t.Errorf("%d bytes allocated to refuse it", alloc)
			}
		})
	}
}
