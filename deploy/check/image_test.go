package check

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// TestImage builds the image as cmd/fanoutd-image does, writes it as an
// OCI layout and reads it back: the layout is valid, the configuration is
// non-root with the probe as health check, the binary is static and runs —
// taken out of the image, it serves /healthz to the image's own health
// check command, drains as the Kubernetes preStop hook asks, and stops
// on SIGTERM, and with the image's listen address
// and no tokens it refuses to start.
func TestImage(t *testing.T) {
	if _, err := os.Stat(caBundle); err != nil {
		t.Skipf("%s: %v (apt-get install ca-certificates)", caBundle, err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "fanoutd")
	if err := BuildBinary("../..", GOARCH(), bin); err != nil {
		t.Fatal(err)
	}
	img, err := Image(bin, "../config", caBundle, GOARCH())
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(filepath.Join(dir, "oci"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index: %v, %d manifests", err, len(m.Manifests))
	}
	img, err = idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Fatalf("the image read back is not valid: %v", err)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != GOARCH() {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/fanoutd"}) || !slices.Equal(c.Cmd, []string{"serve", "--config", "/etc/fanoutd/fanoutd.yaml"}) {
		t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v", c.ExposedPorts)
	}
	if c.Healthcheck == nil || !slices.Equal(c.Healthcheck.Test, []string{"CMD", "/usr/local/bin/fanoutd", "probe", "http://127.0.0.1:8080/healthz"}) {
		t.Errorf("healthcheck %+v", c.Healthcheck)
	}
	if !slices.Contains(c.Env, "FANOUTD_LISTEN=0.0.0.0:8080") {
		t.Errorf("env %q", c.Env)
	}

	files := layerFiles(t, img)
	for name, want := range map[string]struct {
		mode int64
		uid  int
	}{
		"usr/local/bin/fanoutd":             {0o755, 0},
		"etc/fanoutd/fanoutd.yaml":          {0o644, 0},
		"etc/fanoutd/ingest.yaml":           {0o644, 0},
		"etc/fanoutd/edge.yaml":             {0o644, 0},
		"etc/ssl/certs/ca-certificates.crt": {0o644, 0},
		"etc/passwd":                        {0o644, 0},
		"var/lib/fanoutd":                   {0o755, UID},
		"tmp":                               {0o1777, 0},
	} {
		f, ok := files[name]
		if !ok {
			t.Errorf("%s is not in the image", name)
			continue
		}
		if f.hdr.Mode != want.mode || f.hdr.Uid != want.uid {
			t.Errorf("%s: mode %o uid %d, want %o uid %d", name, f.hdr.Mode, f.hdr.Uid, want.mode, want.uid)
		}
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "usr/bin/curl"} {
		if _, ok := files[shell]; ok {
			t.Errorf("%s is in the image", shell)
		}
	}
	if !strings.Contains(string(files["etc/passwd"].body), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd: %q", files["etc/passwd"].body)
	}

	// The binary as the image has it.
	ib := filepath.Join(dir, "from-image")
	if err := os.WriteFile(ib, files["usr/local/bin/fanoutd"].body, 0o755); err != nil {
		t.Fatal(err)
	}
	e, err := elf.Open(ib)
	if err != nil {
		t.Fatal(err)
	}
	for _, prog := range e.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("the binary has an interpreter: it is not static")
		}
	}
	if libs, _ := e.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v", libs)
	}
	e.Close()
	if GOARCH() != "amd64" && GOARCH() != "arm64" || GOARCH() != goarchHost() {
		t.Skipf("the binary is for %s: not run here", GOARCH())
	}
	cfgPath := filepath.Join(dir, "fanoutd.yaml")
	os.WriteFile(cfgPath, files["etc/fanoutd/fanoutd.yaml"].body, 0o644)
	if out, err := exec.Command(ib, "check-config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("check-config of the image's fanoutd.yaml: %v\n%s", err, out)
	}

	// The image's environment: 0.0.0.0 without tokens is refused.
	refuse := exec.Command(ib, "serve", "--config", cfgPath)
	refuse.Dir, refuse.Env = dir, []string{"FANOUTD_LISTEN=0.0.0.0:0"}
	out, err := refuse.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "no tokens are configured") {
		t.Errorf("serve on 0.0.0.0 without tokens: %v\n%s", err, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs bytes.Buffer
	srv := exec.Command(ib, "serve", "--config", cfgPath)
	srv.Dir, srv.Env = dir, []string{"FANOUTD_LISTEN=" + addr}
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	health := c.Healthcheck.Test[1:]
	url := strings.Replace(health[2], "127.0.0.1:8080", addr, 1)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if exec.Command(ib, health[1], url).Run() == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			srv.Process.Kill()
			t.Fatalf("the health check never passed\n%s", logs.String())
		}
	}
	// The edge's preStop hook (deploy/kubernetes/edge.yaml) with this
	// binary: drain, then /readyz answers 503 draining.
	drainURL := strings.Replace("http://127.0.0.1:8080/drainz", "127.0.0.1:8080", addr, 1)
	if out, err := exec.Command(ib, "drain", "--wait", "0s", drainURL).CombinedOutput(); err != nil || !strings.Contains(string(out), `"draining": true`) {
		t.Errorf("fanoutd drain: %v\n%s", err, out)
	}
	if out, err := exec.Command(ib, "probe", strings.Replace(url, "/healthz", "/readyz", 1)).CombinedOutput(); err == nil || !strings.Contains(string(out), `"draining": true`) {
		t.Errorf("probe /readyz after drain: %v\n%s", err, out)
	}
	srv.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "fanoutd stopped") {
		t.Errorf("no orderly stop in the log:\n%s", logs.String())
	}
}

type tarFile struct {
	hdr  *tar.Header
	body []byte
}

func layerFiles(t *testing.T, img v1.Image) map[string]tarFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]tarFile{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = tarFile{h, b}
	}
}
