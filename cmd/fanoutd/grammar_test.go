package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/fanoutd/fanoutd/claimcheck"
)

// TestStreamsFlagAccumulates: replay --export takes --streams repeated or
// comma-separated, the same streams either way, and flags after the
// capture; record's --streams takes the same forms.
func TestStreamsFlagAccumulates(t *testing.T) {
	exp := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(append([]string{"replay"}, args...), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	a, b := "binance:book_snapshot_2_10ms:*", "binance:level2:*"
	comma := exp("--export", "-", "--streams", a+","+b, capture("binance"))
	repeated := exp(capture("binance"), "--export", "-", "--streams", a, "--streams", b)
	if comma != repeated {
		t.Fatal("--streams A,B and --streams A --streams B export differently")
	}
	if !strings.Contains(comma, `"stream":"binance:book_snapshot_2_10ms:BTCUSDT"`) || !strings.Contains(comma, `"type":"book","stream":"binance:level2:BTCUSDT"`) {
		t.Fatal("the export lacks one of the two streams")
	}
	if only := exp("--export", "-", "--streams", b, capture("binance")); only == comma {
		t.Fatal("the second --streams was ignored")
	}
	// Several values after one --streams, as record takes them; a capture
	// ends the list.
	several := exp("--export", "-", "--streams", a, b, capture("binance"))
	if several != comma {
		t.Fatal("--streams A B CAPTURE exports differently from --streams A,B CAPTURE")
	}
	if after := exp(capture("binance"), "--streams", a, b, "--export", "-"); after != comma {
		t.Fatal("--streams A B after the capture exports differently")
	}
	// record: every form reaches the streams it records, repeated flags
	// accumulating (each run stops at the value it refuses, which it names).
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--streams", "BTCUSDT", "bad sym!", "--streams", "ETHUSDT"}, `"bad sym!" is not a symbol`},
		{[]string{"--streams", "BTCUSDT,ETHUSDT", "--streams", "SOLUSDT", "kraken:trades:XBT/USD"}, `"kraken:trades:XBT/USD" is not a stream of binance`},
		{[]string{"--streams=BTCUSDT", "ETHUSDT", "--streams", "okx:trades:BTC-USDT"}, `"okx:trades:BTC-USDT" is not a stream of binance`},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"record", "--venue", "binance", "--out", t.TempDir()}, tc.args...)
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %s", tc.args, code, errb.String(), tc.want)
		}
	}
	// The values themselves: the first form's symbols, all of them.
	syms, _, err := recordStreams("binance", []string{"BTCUSDT", "ETHUSDT", "binance:trades:SOLUSDT"})
	if err != nil || !slices.Equal(syms, []string{"BTCUSDT", "ETHUSDT", "SOLUSDT"}) {
		t.Fatalf("record --streams: %v %v", syms, err)
	}
}

// TestStreamsPatternMatchingNothingSaysSo: an export whose --streams
// pattern matches no stream of the captures says which.
func TestStreamsPatternMatchingNothingSaysSo(t *testing.T) {
	for _, args := range [][]string{
		{"replay", "--export", "-", "--streams", "binance:level2:*,binance:trades:NOPE", capture("binance")},
		{"replay", "--export", "-", "--streams", "binance:level2:*", "binance:trades:NOPE", capture("binance")},
		{"replay", capture("binance"), "--streams", "binance:level2:*", "--streams", "binance:trades:NOPE", "--export", "-"},
	} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		if code != 0 || !strings.Contains(errb.String(), `"binance:trades:NOPE" matches no stream`) || strings.Contains(errb.String(), `"binance:level2:*" matches`) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// TestFlagsAfterArguments: every command takes its flags after its other
// arguments; after "--" an argument is not a flag.
func TestFlagsAfterArguments(t *testing.T) {
	var out, errb bytes.Buffer
	// tail: the flag after the stream is the URL, not a second stream.
	if code := run([]string{"tail", "coinbase:level2:BTC-USD", "--url", "ws://127.0.0.1:1/v1/stream"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "127.0.0.1:1") {
		t.Fatalf("tail: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"serve", "stray"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unexpected argument "stray"`) {
		t.Fatalf("serve: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"replay", "--export", "-", "--", "--loop"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--loop") {
		t.Fatalf("replay -- --loop: exit %d, stderr %q", code, errb.String())
	}
}

// TestCheckConfigTakesConfigFlag: check-config takes the file as its
// argument or as --config, as every other command does.
func TestCheckConfigTakesConfigFlag(t *testing.T) {
	p := writeConfig(t, "listen: 127.0.0.1:9999\n")
	for _, args := range [][]string{{p}, {"--config", p}, {"--config=" + p}} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"check-config"}, args...), &out, &errb); code != 0 || out.String() != "ok\n" {
			t.Errorf("%v: exit %d, %q %q", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check-config"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage: fanoutd check-config") {
		t.Errorf("no file: exit %d, %q", code, errb.String())
	}
}

// TestHelpListsCommands: fanoutd help, --help and -h list the commands.
func TestHelpListsCommands(t *testing.T) {
	for _, a := range []string{"help", "--help", "-h"} {
		var out, errb bytes.Buffer
		if code := run([]string{a}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d %s", a, code, errb.String())
		}
		for _, c := range []string{"serve", "replay", "tail", "record", "check-config", "claims get", "version"} {
			if !strings.Contains(out.String(), "\n  "+c+" ") {
				t.Errorf("%s does not list %s:\n%s", a, c, out.String())
			}
		}
	}
}

// TestVersionNamesTheCommit: the version line carries vcs.revision, with
// -dirty for a modified tree, and says so when the build has none.
func TestVersionNamesTheCommit(t *testing.T) {
	bi := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}
	if got := versionLine("0.2.0-dev", bi); got != "fanoutd 0.2.0-dev (commit 0123abcd-dirty)" {
		t.Errorf("dirty: %q", got)
	}
	bi.Settings[1].Value = "false"
	if got := versionLine("0.2.0-dev", bi); got != "fanoutd 0.2.0-dev (commit 0123abcd)" {
		t.Errorf("clean: %q", got)
	}
	if got := versionLine("0.2.0-dev", &debug.BuildInfo{}); !strings.Contains(got, "commit unknown") {
		t.Errorf("no vcs: %q", got)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "(commit ") {
		t.Fatalf("exit %d, %q", code, out.String())
	}
}

// TestClaimsGetTakesClaimForm: claims get takes claim:<tenant>/<id>, the
// form replay takes, as well as the URL.
func TestClaimsGetTakesClaimForm(t *testing.T) {
	dir := t.TempDir()
	cfg := claimcheck.Defaults()
	cfg.Stores[0].Path = dir
	n, err := claimcheck.Open(context.Background(), cfg, claimcheck.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := n.Writer.CheckIn(context.Background(), "", claimcheck.PackClaim{Kind: claimcheck.KindSnapshot, Stream: string(l2), Seq: 1, Time: t0, Data: []byte(`{"x":1}`)})
	n.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := writeConfig(t, "claim_check: {stores: [{kind: dir, path: "+dir+"}]}\n")
	for _, ref := range []string{"claim:" + c.Tenant + "/" + c.ID, c.URL} {
		var out, errb bytes.Buffer
		if code := run([]string{"claims", "get", ref, "--config", p}, &out, &errb); code != 0 || out.String() != `{"x":1}` {
			t.Errorf("%s: exit %d, %q %q", ref, code, out.String(), errb.String())
		}
	}
}

// TestCheckConfigReportsEveryKey: check-config names every bad key in one
// run, an unknown key with the nearest known one, and exits 2.
func TestCheckConfigReportsEveryKey(t *testing.T) {
	p := writeConfig(t, "websocket:\n  write_timout: 5s\nlog_level: loud\n")
	var out, errb bytes.Buffer
	code := run([]string{"check-config", p}, &out, &errb)
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	if code != 2 || len(lines) != 2 || !strings.Contains(lines[0], "websocket.write_timout: unknown key (line 2); did you mean write_timeout?") ||
		!strings.HasPrefix(lines[1], "fanoutd: config: log_level:") {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
}

// TestServeReportsEveryKey: serve stops on a bad file naming every bad
// key, each on its own "fanoutd: config:" line, as check-config does.
func TestServeReportsEveryKey(t *testing.T) {
	p := writeConfig(t, "websocket:\n  write_timout: 5s\nlog_level: loud\n")
	var out, errb bytes.Buffer
	code := run([]string{"serve", "--config", p}, &out, &errb)
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	if code != 2 || len(lines) != 2 || !strings.HasPrefix(lines[0], "fanoutd: config: websocket.write_timout") || !strings.HasPrefix(lines[1], "fanoutd: config: log_level") {
		t.Fatalf("exit %d, stderr:\n%s", code, errb.String())
	}
}
