// Command fanoutd-image builds fanoutd's container image without a Docker
// engine (deploy/check.Image) and writes it as a tarball that `docker
// load` and `podman load` read, or as an OCI layout directory:
//
//	go run ./cmd/fanoutd-image [-tag fanoutd:dev] [-arch amd64] (-tar FILE | -oci DIR)
//
// Run it from deploy/check.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/fanoutd/fanoutd/deploy/check"
)

func main() {
	tag := flag.String("tag", "fanoutd:dev", "the image's name in the tarball")
	arch := flag.String("arch", check.GOARCH(), "GOARCH of the binary")
	tarPath := flag.String("tar", "", "write a docker-load tarball here")
	ociDir := flag.String("oci", "", "write an OCI image layout here")
	root := flag.String("root", "../..", "the fanoutd repository")
	flag.Parse()
	if (*tarPath == "") == (*ociDir == "") {
		fmt.Fprintln(os.Stderr, "fanoutd-image: give one of -tar and -oci")
		os.Exit(2)
	}
	if err := run(*root, *arch, *tag, *tarPath, *ociDir); err != nil {
		fmt.Fprintln(os.Stderr, "fanoutd-image:", err)
		os.Exit(1)
	}
}

func run(root, arch, tag, tarPath, ociDir string) error {
	tmp, err := os.MkdirTemp("", "fanoutd-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "fanoutd")
	if err := check.BuildBinary(root, arch, bin); err != nil {
		return err
	}
	img, err := check.Image(bin, filepath.Join(root, "deploy", "config"), "/etc/ssl/certs/ca-certificates.crt", arch)
	if err != nil {
		return err
	}
	if tarPath != "" {
		ref, err := name.NewTag(tag)
		if err != nil {
			return err
		}
		return tarball.WriteToFile(tarPath, ref, img)
	}
	p, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img)
}
