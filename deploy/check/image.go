package check

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The image's user: distroless's nonroot, no login, no home to write.
const (
	UID = 65532
	GID = 65532
)

// ImageConfig is the image's run configuration; deploy/Dockerfile states
// the same (TestDockerfile).
func ImageConfig() v1.Config {
	return v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint:   []string{"/usr/local/bin/fanoutd"},
		Cmd:          []string{"serve", "--config", "/etc/fanoutd/fanoutd.yaml"},
		WorkingDir:   "/var/lib/fanoutd",
		Env:          []string{"PATH=/usr/local/bin", "FANOUTD_LISTEN=0.0.0.0:8080", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
		Volumes:      map[string]struct{}{"/var/lib/fanoutd": {}},
		Healthcheck: &v1.HealthConfig{
			Test:        []string{"CMD", "/usr/local/bin/fanoutd", "probe", "http://127.0.0.1:8080/healthz"},
			Interval:    10 * time.Second,
			Timeout:     3 * time.Second,
			StartPeriod: 10 * time.Second,
			Retries:     3,
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":  "fanoutd",
			"org.opencontainers.image.source": "https://github.com/fanoutd/fanoutd",
		},
	}
}

// BuildBinary builds cmd/fanoutd of the repository at root as a static
// binary (CGO_ENABLED=0) for linux/goarch into out.
func BuildBinary(root, goarch, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/fanoutd")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, b)
	}
	return nil
}

// Image is fanoutd's image without a Docker engine or a base image: one
// layer on empty.Image holding the static binary, the node configurations
// of deploy/config, the CA bundle (caBundle, for the venues' TLS), an
// /etc/passwd naming the nonroot user, and its data directory; no shell.
// Every file's time is the Unix epoch, so the same inputs make the same
// digest.
func Image(binary, configDir, caBundle, goarch string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid int) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: time.Unix(0, 0)})
	}
	file := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	for _, d := range []string{"etc", "etc/fanoutd", "etc/ssl", "etc/ssl/certs", "usr", "usr/local", "usr/local/bin", "var", "var/lib"} {
		dir(d, 0o755, 0)
	}
	dir("tmp", 0o1777, 0)
	dir("var/lib/fanoutd", 0o755, UID)
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w (apt-get install ca-certificates)", err)
	}
	files := []struct {
		name string
		mode int64
		body []byte
	}{
		{"usr/local/bin/fanoutd", 0o755, bin},
		{"etc/ssl/certs/ca-certificates.crt", 0o644, ca},
		{"etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/var/lib/fanoutd:/sbin/nologin\n", UID, GID)},
		{"etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", GID)},
	}
	cfgs, err := filepath.Glob(filepath.Join(configDir, "*.yaml"))
	if err != nil || len(cfgs) == 0 {
		return nil, fmt.Errorf("no configuration in %s", configDir)
	}
	for _, c := range cfgs {
		b, err := os.ReadFile(c)
		if err != nil {
			return nil, err
		}
		files = append(files, struct {
			name string
			mode int64
			body []byte
		}{"etc/fanoutd/" + filepath.Base(c), 0o644, b})
	}
	for _, f := range files {
		if err := file(f.name, f.mode, f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: v1.History{CreatedBy: "deploy/check.Image", Created: v1.Time{Time: time.Unix(0, 0)}}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goarch
	cf.Created = v1.Time{Time: time.Unix(0, 0)}
	cf.Config = ImageConfig()
	return mutate.ConfigFile(img, cf)
}

// GOARCH is the architecture images are built for unless told otherwise.
func GOARCH() string {
	if a := os.Getenv("GOARCH"); a != "" {
		return a
	}
	return runtime.GOARCH
}

func goarchHost() string { return runtime.GOARCH }
