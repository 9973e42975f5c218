// Command fanoutd is the market-data fanout daemon and its tools:
//
//	fanoutd serve [--config FILE] [--listen ADDR] [--insecure]   (the default command)
//	fanoutd check-config FILE
//	fanoutd tail [--url URL] [--token T] [--name N] STREAM…
//	fanoutd bench [--subs N] [--rate R] [--size B] [--duration D] [--io-uring=false] [--peer centrifugo]
//	fanoutd record --venue V --streams S… --out DIR [--duration D] [--config FILE]
//	fanoutd replay [--venue V] [--speed 1|N|max] [--loop] [--wait N] [--config FILE] [--listen ADDR] CAPTURE…
//	fanoutd replay --export FILE|- CAPTURE…
//	fanoutd claims get REF [--config FILE] [-o FILE]
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

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/binance"
	"github.com/fanoutd/fanoutd/venues/bybit"
	"github.com/fanoutd/fanoutd/venues/coinbase"
	"github.com/fanoutd/fanoutd/venues/kraken"
	"github.com/fanoutd/fanoutd/venues/okx"
)

// venueConstructors lists the venue adapters built into this binary, by
// name, explicitly (no init-time registration).
var venueConstructors = map[string]Constructor{
	"coinbase": adapt(coinbase.New),
	"kraken":   adapt(kraken.New),
	"binance":  adapt(binance.New),
	"okx":      adapt(okx.New),
	"bybit":    adapt(bybit.New),
}

// venueDecoders lists the venues' decoders, which replay drives from
// captures, next to their adapters.
var venueDecoders = map[string]DecoderConstructor{
	"coinbase": decoderOf(coinbase.NewDecoder),
	"kraken":   decoderOf(kraken.NewDecoder),
	"binance":  decoderOf(binance.NewDecoder),
	"okx":      decoderOf(okx.NewDecoder),
	"bybit":    decoderOf(bybit.NewDecoder),
}

// adapt turns a venue package's New into a Constructor.
func adapt[A venue.Adapter](newAdapter func(venue.Config) (A, error)) Constructor {
	return func(c venue.Config) (venue.Adapter, error) {
		a, err := newAdapter(c)
		if err != nil {
			return nil, err
		}
		return a, nil
	}
}

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
		return serve(ctx, args, stdout, stderr, venueConstructors, nil)
	case "check-config":
		return checkConfig(args, stdout, stderr)
	case "tail":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return tail(ctx, args, stdout, stderr)
	case "bench":
		return bench(args, stdout, stderr)
	case "claims":
		return claimsCmd(context.Background(), args, stdout, stderr)
	case "bench-clients":
		return benchClients(args, stdout, stderr)
	case "record":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return recordCmd(ctx, args, stdout, stderr, venueConstructors)
	case "replay":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return replayCmd(ctx, args, stdout, stderr, nil)
	case "version":
		fmt.Fprintln(stdout, "fanoutd", version)
		return 0
	default:
		fmt.Fprintf(stderr, "fanoutd: unknown command %q (want serve, check-config, tail, bench, record, replay, claims or version)\n", cmd)
		return 2
	}
}

const version = "0.2.0-dev"

// serve runs the daemon until ctx is done. ready, if not nil, receives the
// listening address once the daemon accepts connections (for tests).
func serve(ctx context.Context, args []string, stdout, stderr io.Writer, ctors map[string]Constructor, ready chan<- string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration file (default fanoutd.yaml if present, else built-in defaults)")
	listen := fs.String("listen", "", "address to listen on; overrides the config's listen and FANOUTD_LISTEN (default 127.0.0.1:8080)")
	insecure := fs.Bool("insecure", false, "allow a non-loopback listen address without tokens")
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
	if !loopback(cfg.Listen) && len(cfg.Tokens) == 0 && !*insecure {
		fmt.Fprintf(stderr, "fanoutd: listen: %q is not a loopback address and no tokens are configured (configure tokens, or pass --insecure)\n", cfg.Listen)
		return 2
	}
	var level slog.Level
	level.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	d, err := NewDaemon(cfg, ctors, log)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: listen %s: %v\n", cfg.Listen, err)
		return 1
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
	if _, err := LoadConfig(args[0], os.Getenv); err != nil {
		fmt.Fprintf(stderr, "fanoutd: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// loadCommandConfig loads a command's --config: path, else ./fanoutd.yaml
// if there is one, else the built-in defaults; with the environment's
// overrides.
func loadCommandConfig(path string) (*Config, error) {
	if path == "" {
		if _, err := os.Stat("fanoutd.yaml"); err == nil {
			path = "fanoutd.yaml"
		}
	}
	return LoadConfig(path, os.Getenv)
}
