package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/internal/cli"
	"github.com/fanoutd/fanoutd/internal/daemon"
)

// claimsCmd is `fanoutd claims get REF [--config FILE] [-o FILE]`: it
// reads the claim straight from the configured stores, verifies its
// sha256 and writes its bytes to FILE (atomically) or stdout. Exit 2 for
// bad usage, configuration or reference; 1 when the claim cannot be read
// or does not verify.
func claimsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func() int {
		fmt.Fprintln(stderr, "usage: fanoutd claims get REF [--config FILE] [-o FILE]   (REF: <tenant>/<claim id>, claim:<tenant>/<claim id>, or a claim URL)")
		return 2
	}
	if len(args) == 0 || args[0] != "get" {
		return usage()
	}
	fs := flag.NewFlagSet("claims get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration file (default fanoutd.yaml if present, else built-in defaults)")
	out := fs.String("o", "", "write the claim to this file instead of stdout")
	refs, err := cli.ParseArgs(fs, args[1:])
	if err != nil {
		return 2
	}
	if len(refs) != 1 {
		return usage()
	}
	if ref, ok := claimRef(refs[0]); ok { // claim:<tenant>/<id>, as replay takes it
		refs[0] = ref
	}
	if _, err := claimcheck.ParseRef(refs[0]); err != nil {
		fmt.Fprintf(stderr, "fanoutd: claims get: %v\n", err)
		return 2
	}
	cfg, err := loadCommandConfig(*cfgPath)
	if err != nil {
		printErr(stderr, err, "")
		return 2
	}
	data, err := daemon.Redeem(ctx, cfg.ClaimCheck, refs[0])
	if err != nil {
		fmt.Fprintf(stderr, "fanoutd: claims get: %v\n", err)
		return 1
	}
	if *out == "" {
		if _, err := stdout.Write(data); err != nil {
			fmt.Fprintf(stderr, "fanoutd: claims get: %v\n", err)
			return 1
		}
		return 0
	}
	if err := writeFileAtomic(*out, data); err != nil {
		fmt.Fprintf(stderr, "fanoutd: claims get: %v\n", err)
		return 1
	}
	return 0
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory, so path holds either nothing new or all of data.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
