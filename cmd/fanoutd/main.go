// Command fanoutd is the market-data fanout daemon and its tools:
//
//	fanoutd serve [--config FILE] [--listen ADDR] [--insecure]   (the default command)
//	fanoutd check-config [--config] FILE
//	fanoutd tail [--url URL] [--token T] [--name N] STREAM…
//	fanoutd record --venue V --streams S[,S…] --out DIR [--duration D] [--config FILE]
//	fanoutd replay [--venue V] [--speed 1|N|max] [--loop] [--wait N] [--align=false] [--config FILE] [--listen ADDR] CAPTURE…
//	fanoutd replay --export FILE|- [--streams S[,S…]] CAPTURE…
//	fanoutd claims get REF [--config FILE] [-o FILE]
//	fanoutd probe [--timeout D] [URL]   (exit 0 if URL, default the local /readyz, answers 200)
//	fanoutd drain [--wait D] [--timeout D] [URL]   (POST the local /drainz, then wait D: a preStop hook)
//	fanoutd help
//	fanoutd version
//
// The load harness and the soak are another command, cmd/fanoutd-bench.
//
// Flags may come before or after a command's other arguments; a flag that
// takes a list (--streams) may be repeated, each value comma-separated, and
// takes several values (--streams A B; replay's first capture ends them).
// Exit codes: 0 success, 1 runtime failure, 2 bad usage or configuration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/fanoutd/fanoutd/internal/cli"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/venues"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// commands is what `fanoutd help` lists, in order.
const commands = `usage: fanoutd [COMMAND] [FLAGS] [ARGS]

commands:
  serve          run the daemon (the default command)      fanoutd serve --config fanoutd.yaml
  replay         serve recorded captures as live venues    fanoutd replay --loop testdata/replay/demo/*.jsonl.gz
  tail           print what a running daemon sends         fanoutd tail coinbase:level2:BTC-USD
  record         record a venue's frames to captures       fanoutd record --venue kraken --streams BTC/USD --out dir
  check-config   check a configuration file, every key     fanoutd check-config fanoutd.yaml
  claims get     fetch a stored snapshot or capture        fanoutd claims get claim:TENANT/ID
  history import check captures in to the history index    fanoutd history import --config fanoutd.yaml CAPTURE…
  probe          exit 0 if the daemon is ready (for images) fanoutd probe http://127.0.0.1:8080/readyz
  drain          stop taking clients, then wait (preStop)  fanoutd drain --wait 5s
  help           this list
  version        the version and the commit it was built from

'fanoutd COMMAND --help' lists a command's flags; flags may follow its arguments.
Documentation: README.md and docs/ (docs/operations.md has every command and flag).
`

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	} else if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		cmd = "help"
	}
	switch cmd {
	case "help":
		fmt.Fprint(stdout, commands)
		return 0
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return serve(ctx, args, stdout, stderr, daemon.Options{}, nil)
	case "check-config":
		return checkConfig(args, stdout, stderr)
	case "tail":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return tailCmd(ctx, args, stdout, stderr)
	case "claims":
		return claimsCmd(context.Background(), args, stdout, stderr)
	case "history":
		return historyCmd(context.Background(), args, stdout, stderr)
	case "record":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return recordCmd(ctx, args, stdout, stderr, venues.All)
	case "replay":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return replayCmd(ctx, args, stdout, stderr, nil)
	case "probe":
		return probeCmd(args, stdout, stderr)
	case "drain":
		return drainCmd(args, stdout, stderr)
	case "version":
		bi, _ := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, versionLine(daemon.Version, bi))
		return 0
	default:
		fmt.Fprintf(stderr, "fanoutd: unknown command %q (want serve, check-config, tail, record, replay, claims, history, probe, drain, help or version)\n", cmd)
		return 2
	}
}

// versionLine is `fanoutd version`'s output: the version and the commit the
// binary was built from (vcs.revision, with -dirty for uncommitted
// changes), as the go command stamps a build inside a git work tree.
func versionLine(version string, bi *debug.BuildInfo) string {
	rev, dirty := "", false
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev == "" {
		return "fanoutd " + version + " (commit unknown: built without version control information)"
	}
	if dirty {
		rev += "-dirty"
	}
	return "fanoutd " + version + " (commit " + rev + ")"
}

// serve runs the daemon until ctx is done. o is the daemon's options
// without Config and Logger (tests set venues and hooks); ready, if not
// nil, receives the listening address once the daemon accepts
// connections.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer, o daemon.Options, ready chan<- string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration file (default fanoutd.yaml if present, else built-in defaults)")
	listen := fs.String("listen", "", "address to listen on; overrides the config's listen and FANOUTD_LISTEN (default 127.0.0.1:8080)")
	insecure := fs.Bool("insecure", false, "allow a non-loopback listen address without tokens")
	cf := clusterFlags(fs)
	if extra, err := cli.ParseArgs(fs, args); err != nil {
		return 2
	} else if len(extra) > 0 {
		fmt.Fprintf(stderr, "fanoutd: serve: unexpected argument %q (try fanoutd help)\n", extra[0])
		return 2
	}
	cfg, err := loadCommandConfig(*cfgPath)
	if err != nil {
		printErr(stderr, err, "")
		return 2
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if err := cf.apply(fs, cfg); err != nil {
		printErr(stderr, err, "")
		return 2
	}
	log := logger(cfg, stderr)
	ln, code := openListener(cfg, *insecure, stderr)
	if ln == nil {
		return code
	}
	o.Config, o.Logger = cfg, log
	d, err := daemon.New(o)
	if err != nil {
		ln.Close()
		printErr(stderr, err, "")
		return 2
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reloaded := make(chan struct{})
	rctx, stopReload := context.WithCancel(ctx)
	go func() {
		defer close(reloaded)
		reloadOn(rctx, hup, *cfgPath, d, stderr)
	}()
	defer func() {
		signal.Stop(hup)
		stopReload()
		<-reloaded
	}()
	if ready != nil {
		ready <- ln.Addr().String()
	}
	if err := d.Run(ctx, ln); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		printErr(stderr, err, "")
		return 1
	}
	return 0
}

func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fanoutd check-config [--config] FILE")
		fs.PrintDefaults()
	}
	path := fs.String("config", "", "the configuration file to check (or give it as the argument)")
	files, err := cli.ParseArgs(fs, args)
	if err != nil {
		return 2
	}
	if *path != "" {
		files = append([]string{*path}, files...)
	}
	if len(files) != 1 {
		fs.Usage()
		return 2
	}
	if _, errs := config.LoadAll(files[0], os.Getenv); len(errs) > 0 {
		for _, err := range errs {
			printErr(stderr, err, "")
		}
		return 2
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// reloadOn reloads the configuration file path (as serve found it) into
// d on every signal from hup, until ctx is done. A file that does not
// load changes nothing: each bad key is printed as
// "fanoutd: config: <key>: …", as at startup.
func reloadOn(ctx context.Context, hup <-chan os.Signal, path string, d *daemon.Daemon, stderr io.Writer) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		err := d.ReloadFrom(func() (*config.Config, error) { return loadCommandConfig(path) })
		if err != nil {
			printErr(stderr, err, " (reload refused: nothing changed)")
		}
	}
}

// printErr prints err to stderr, one "fanoutd: " line per line of its
// text (a config.Errors names several keys), each followed by suffix.
func printErr(stderr io.Writer, err error, suffix string) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(stderr, "fanoutd: %s%s\n", line, suffix)
	}
}

// loadCommandConfig loads a command's --config: path, else ./fanoutd.yaml
// if there is one, else the built-in defaults; with the environment's
// overrides. A bad file's error names every bad key.
func loadCommandConfig(path string) (*config.Config, error) {
	if path == "" {
		if _, err := os.Stat("fanoutd.yaml"); err == nil {
			path = "fanoutd.yaml"
		}
	}
	cfg, errs := config.LoadAll(path, os.Getenv)
	switch len(errs) {
	case 0:
		return cfg, nil
	case 1:
		return nil, errs[0]
	}
	return nil, configErrors(errs)
}

// configErrors are every bad key of a configuration, one a line; printErr
// puts "fanoutd: " before each.
type configErrors []error

func (e configErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "\n")
}

func (e configErrors) Unwrap() []error { return e }

// logger is the commands' logger: text on stderr at the configured level.
func logger(cfg *config.Config, stderr io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(cfg.LogLevel))
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// openListener opens cfg.Listen, refusing a non-loopback address without
// tokens unless insecure (exit 2). On failure it returns nil and the exit
// code.
func openListener(cfg *config.Config, insecure bool, stderr io.Writer) (net.Listener, int) {
	if !config.Loopback(cfg.Listen) && !cfg.AuthEnabled() && !insecure {
		fmt.Fprintf(stderr, "fanoutd: listen: %q is not a loopback address and no tokens are configured (configure tokens, or pass --insecure)\n", cfg.Listen)
		return nil, 2
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: listen %s: %v\n", cfg.Listen, err)
		return nil, 1
	}
	return ln, 0
}
