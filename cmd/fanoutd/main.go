// Command fanoutd is the market-data fanout daemon and its tools:
//
//	fanoutd serve [--config FILE] [--listen ADDR] [--insecure]   (the default command)
//	fanoutd check-config FILE
//	fanoutd tail [--url URL] [--token T] [--name N] STREAM…
//	fanoutd bench [--subs N] [--rate R] [--size B] [--duration D] [--io-uring=false] [--source inproc|venue] [--peer centrifugo]
//	fanoutd soak [--duration D] [--subs N] [--drop-every D] [--speed N] [CAPTURE…]
//	fanoutd record --venue V --streams S… --out DIR [--duration D] [--config FILE]
//	fanoutd replay [--venue V] [--speed 1|N|max] [--loop] [--wait N] [--config FILE] [--listen ADDR] CAPTURE…
//	fanoutd replay --export FILE|- CAPTURE…
//	fanoutd claims get REF [--config FILE] [-o FILE]
//	fanoutd probe [--timeout D] [URL]   (exit 0 if URL, default the local /readyz, answers 200)
//	fanoutd version
//
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
	"syscall"

	"github.com/fanoutd/fanoutd/internal/bench"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/venues"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
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
	case "bench":
		return bench.Main(args, stdout, stderr)
	case "claims":
		return claimsCmd(context.Background(), args, stdout, stderr)
	case "bench-clients":
		return bench.Clients(args, stdout, stderr)
	case "bench-venue":
		return bench.VenueMain(args, os.Stdin, stdout, stderr)
	case "soak":
		return bench.Soak(args, stdout, stderr)
	case "soak-clients":
		return bench.SoakClients(args, stdout, stderr)
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
	case "version":
		fmt.Fprintln(stdout, "fanoutd", daemon.Version)
		return 0
	default:
		fmt.Fprintf(stderr, "fanoutd: unknown command %q (want serve, check-config, tail, bench, soak, record, replay, claims, probe or version)\n", cmd)
		return 2
	}
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
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := loadCommandConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if err := cf.apply(fs, cfg); err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
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
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	if err := d.Run(ctx, ln); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 1
	}
	return 0
}

func checkConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: fanoutd check-config FILE")
		return 2
	}
	if _, err := config.Load(args[0], os.Getenv); err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// loadCommandConfig loads a command's --config: path, else ./fanoutd.yaml
// if there is one, else the built-in defaults; with the environment's
// overrides.
func loadCommandConfig(path string) (*config.Config, error) {
	if path == "" {
		if _, err := os.Stat("fanoutd.yaml"); err == nil {
			path = "fanoutd.yaml"
		}
	}
	return config.Load(path, os.Getenv)
}

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
	if !config.Loopback(cfg.Listen) && len(cfg.Tokens) == 0 && !insecure {
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
