package cluster

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestConnectCarriesEveryMessage: a connection made by Connect (whose
// reads are RawSyscalls, rawDialer) receives every message published, in
// order, bodies and headers intact, over plain TCP and over TLS; bodies
// from a few bytes to 200 KB, so that messages span reads.
func TestConnectCarriesEveryMessage(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "nats", true: "tls"}[useTLS], func(t *testing.T) {
			o := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
			c := Options{Role: "edge", Node: "conn-test"}
			if useTLS {
				ca, cert, key := writeCerts(t)
				tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cert, KeyFile: key})
				if err != nil {
					t.Fatal(err)
				}
				o.TLSConfig, o.TLS, o.TLSTimeout = tc, true, 5
				c.TLSCA = ca
			}
			s, err := server.NewServer(o)
			if err != nil {
				t.Fatal(err)
			}
			s.Start()
			t.Cleanup(s.Shutdown)
			if !s.ReadyForConnections(10 * time.Second) {
				t.Fatal("nats server not ready")
			}
			scheme := "nats"
			if useTLS {
				scheme = "tls"
			}
			c.NATSURL = fmt.Sprintf("%s://%s", scheme, s.Addr())
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			sub, err := Connect(c, log, Handlers{})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			pub, err := Connect(c, log, Handlers{})
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			ch := make(chan *nats.Msg, 4096)
			if _, err := sub.ChanSubscribe("t.ev", ch); err != nil {
				t.Fatal(err)
			}
			if err := sub.Flush(); err != nil {
				t.Fatal(err)
			}
			if useTLS && !pub.TLSRequired() {
				t.Fatal("the server does not require TLS")
			}
			const n = 2000
			// Mostly small bodies; every 50th up to 200 KB.
			body := func(i int) []byte {
				size := 1 + i%300
				if i%50 == 49 {
					size += (i * 7919) % (200 << 10)
				}
				return bytes.Repeat([]byte{byte('a' + i%26)}, size)
			}
			go func() {
				for i := range n {
					m := &nats.Msg{Subject: "t.ev", Data: body(i), Header: nats.Header{HeaderSeq: {strconv.Itoa(i)}}}
					if err := pub.PublishMsg(m); err != nil {
						t.Errorf("publish %d: %v", i, err)
						return
					}
				}
				pub.Flush()
			}()
			for i := range n {
				select {
				case m := <-ch:
					if got := m.Header.Get(HeaderSeq); got != strconv.Itoa(i) {
						t.Fatalf("message %d has seq %q", i, got)
					}
					if !bytes.Equal(m.Data, body(i)) {
						t.Fatalf("message %d: body of %d bytes, want %d", i, len(m.Data), len(body(i)))
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("message %d not received", i)
				}
			}
		})
	}
}

// TestRawDialerWrapsTCP: the dialer's connections are not plain
// *net.TCPConn (they read with RawSyscall), and read what is sent.
func TestRawDialerWrapsTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("INFO {}\r\n"))
			c.Close()
		}
	}()
	c, err := rawDialer{}.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, plain := c.(*net.TCPConn); plain {
		t.Fatal("rawDialer returned a plain *net.TCPConn")
	}
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "INFO {}\r\n" {
		t.Fatalf("read %q, %v", b, err)
	}
}

// writeCerts writes a CA and a server certificate for 127.0.0.1 signed by
// it, and returns the files: CA, certificate, key.
func writeCerts(t *testing.T) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", srvDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}
