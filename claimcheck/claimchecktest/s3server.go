package claimchecktest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/claimcheck/s3store"
)

// VersityGWModule is the versitygw the tests install when none is found.
const VersityGWModule = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// S3Server is an S3 endpoint on 127.0.0.1 with one bucket.
type S3Server struct {
	Endpoint  string // http://127.0.0.1:port
	AccessKey string
	SecretKey string
	Bucket    string
}

// StoreConfig returns the configuration of an s3 store on the server.
func (s *S3Server) StoreConfig(name string) claimcheck.StoreConfig {
	return claimcheck.StoreConfig{Name: name, Kind: "s3", Endpoint: s.Endpoint, Region: "us-east-1", Bucket: s.Bucket,
		PathStyle: true, AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}
}

// At returns a copy of s addressed through endpoint (a FaultProxy's URL).
func (s *S3Server) At(endpoint string) *S3Server {
	c := *s
	c.Endpoint = endpoint
	return &c
}

// NewStore opens an s3store.Store on the server; the test's cleanup
// closes it.
func (s *S3Server) NewStore(t testing.TB, name string, maxConns int) *s3store.Store {
	t.Helper()
	sc := s.StoreConfig(name)
	sc.MaxConns = maxConns
	st, err := s3store.New(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (s *S3Server) createBucket(t testing.TB) {
	t.Helper()
	st := s.NewStore(t, "setup", 4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)}); err != nil {
		t.Fatalf("creating bucket %s: %v", s.Bucket, err)
	}
	st.Close()
}

var bucketSeq atomic.Int64

// FreshBucket creates a new empty bucket on the server and returns s
// addressed to it.
func (s *S3Server) FreshBucket(t testing.TB) *S3Server {
	t.Helper()
	c := *s
	c.Bucket = fmt.Sprintf("fresh-%d", bucketSeq.Add(1))
	c.createBucket(t)
	return &c
}

// FakeS3 starts gofakes3 (in memory, in process) on 127.0.0.1 with a
// bucket "claims". It has no auth and no throttling; put a FaultProxy in
// front for faults.
func FakeS3(t testing.TB) *S3Server {
	faker := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	ts := httptest.NewServer(faker.Server())
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	s := &S3Server{Endpoint: ts.URL, AccessKey: "AKFAKE", SecretKey: "SKFAKE", Bucket: "claims"}
	s.createBucket(t)
	return s
}

var (
	vgwOnce sync.Once
	vgwPath string
	vgwErr  error
)

// VersityGWBinary returns the path of a versitygw binary: from PATH, else
// $(go env GOBIN) or $(go env GOPATH)/bin, else it runs `go install
// VersityGWModule` (about 200 s on a cold module cache) and uses that.
func VersityGWBinary() (string, error) {
	vgwOnce.Do(func() {
		if p, err := exec.LookPath("versitygw"); err == nil {
			vgwPath = p
			return
		}
		out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
		if err != nil {
			vgwErr = fmt.Errorf("go env: %w", err)
			return
		}
		p := installPath(string(out))
		if _, err := os.Stat(p); err == nil {
			vgwPath = p
			return
		}
		cmd := exec.Command("go", "install", VersityGWModule)
		cmd.Dir = os.TempDir() // outside any module: install never touches go.mod
		if b, err := cmd.CombinedOutput(); err != nil {
			vgwErr = fmt.Errorf("go install %s: %v\n%s", VersityGWModule, err, b)
			return
		}
		if _, err := os.Stat(p); err != nil {
			vgwErr = fmt.Errorf("go install %s succeeded but %s: %w", VersityGWModule, p, err)
			return
		}
		vgwPath = p
	})
	return vgwPath, vgwErr
}

// installPath is where `go install` puts versitygw, given the output of
// `go env GOBIN GOPATH`: one line each, GOBIN's empty when unset (so the
// output must not be trimmed before it is split).
func installPath(goEnv string) string {
	gobin, gopath, _ := strings.Cut(goEnv, "\n")
	if dir := strings.TrimSpace(gobin); dir != "" {
		return filepath.Join(dir, "versitygw")
	}
	first, _, _ := strings.Cut(strings.TrimSpace(gopath), string(os.PathListSeparator))
	return filepath.Join(first, "bin", "versitygw")
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// VersityGW starts a real S3 server — versitygw with its posix backend on
// a temporary directory, listening on a free 127.0.0.1 port — with a
// bucket "claims", and stops it when the test ends. extra flags go before
// the backend (e.g. "--max-requests", "2"). It skips under testing.Short
// and fails the test if versitygw cannot be installed or started.
func VersityGW(t testing.TB, extra ...string) *S3Server {
	t.Helper()
	if testing.Short() {
		t.Skip("versitygw: skipped in -short mode")
	}
	bin, err := VersityGWBinary()
	if err != nil {
		t.Fatalf("versitygw unavailable: %v", err)
	}
	root := t.TempDir()
	s := &S3Server{AccessKey: "AKTESTCLAIMCHECK", SecretKey: "SKTESTCLAIMCHECKSECRET", Bucket: "claims"}
	var cmd *exec.Cmd
	var logs bytes.Buffer
	for attempt := 0; ; attempt++ {
		addr, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		args := append([]string{"--port", addr, "--access", s.AccessKey, "--secret", s.SecretKey, "--quiet"}, extra...)
		args = append(args, "posix", root)
		cmd = exec.Command(bin, args...)
		logs.Reset()
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting versitygw: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		s.Endpoint = "http://" + addr
		if err := waitHTTP(s.Endpoint, exited, 30*time.Second); err == nil {
			t.Cleanup(func() {
				cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					cmd.Process.Kill()
					<-exited
				}
			})
			break
		} else if attempt == 2 {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("versitygw did not start on %s: %v\n%s", addr, err, logs.String())
		} else {
			cmd.Process.Kill()
			<-exited
		}
	}
	s.createBucket(t)
	return s
}

func waitHTTP(endpoint string, exited <-chan error, d time.Duration) error {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("exited: %v", err)
		default:
		}
		if resp, err := c.Get(endpoint + "/"); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no answer within %v", d)
}
