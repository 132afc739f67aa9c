package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesUnsafeNonLoopbackListen: a non-loopback listen needs
// tokens and TLS (or an explicit --insecure-plaintext), and one refusal
// names every missing flag. Every unusable flag, file or address exits 2.
func TestServeRefusesUnsafeNonLoopbackListen(t *testing.T) {
	dir := t.TempDir()
	tokens := writeSecret(t, filepath.Join(dir, "tokens.json"), `[{"token":"t","principal":"p","tenant":"a","expiresAt":"2999-01-01T00:00:00Z"}]`)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, []string{"--auth-tokens", "--tls-cert", "--insecure-plaintext"}},
		{[]string{"--listen", "0.0.0.0:0", "--auth-tokens", tokens}, []string{"--insecure-plaintext"}},
		{[]string{"--tls-cert", "x.pem"}, []string{"go together"}},
		{[]string{"--fault-delay", "get"}, []string{"METHOD=DURATION"}},
		{[]string{"--fault-delay", "nope=1s"}, []string{"unknown method"}},
		{[]string{"--sync", "sometimes"}, []string{"--sync"}},
		{[]string{"--data", dir}, []string{"--data", "--store memory"}},
		{[]string{"--workers", filepath.Join(dir, "missing.json")}, []string{"workers file"}},
		{[]string{"--auth-tokens", filepath.Join(dir, "missing.json")}, []string{"missing.json"}},
		{[]string{"--listen", busy.Addr().String()}, []string{"listen on"}},
		{[]string{"--cpuprofile", filepath.Join(dir, "no", "such", "dir")}, []string{"--cpuprofile"}},
		{[]string{"--keep-workspaces", "-1h"}, []string{"--keep-workspaces"}},
		{[]string{"--repos", filepath.Join(dir, "missing.json")}, []string{"repository file", "missing.json"}},
	} {
		r := oecp(t, nil, append([]string{"serve", "--store", "memory"}, c.args...)...)
		if r.code != exitUsage {
			t.Errorf("serve %v: exit %d, stderr %q; want exit 2", c.args, r.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("serve %v: stderr %q lacks %q", c.args, r.stderr, w)
			}
		}
	}
	if r := oecp(t, nil, "serve", "--backend", "fixture", "--store", "sqlite"); r.code != exitUsage || !strings.Contains(r.stderr, "memory") {
		t.Errorf("serve --backend fixture --store sqlite: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestServeWildcardListenLogsReachableURL: a wildcard listen announces a
// loopback URL that clients can dial, and the bound address.
func TestServeWildcardListenLogsReachableURL(t *testing.T) {
	dir := t.TempDir()
	tokens := writeSecret(t, filepath.Join(dir, "tokens.json"), `[{"token":"t","principal":"p","tenant":"a","expiresAt":"2999-01-01T00:00:00Z"}]`)
	tokenFile := writeSecret(t, filepath.Join(dir, "token"), "t")
	srv := startServer(t, "--listen", "0.0.0.0:0", "--auth-tokens", tokens, "--insecure-plaintext")
	if !strings.HasPrefix(srv.url, "ws://127.0.0.1:") {
		t.Fatalf("announced %s, want a ws://127.0.0.1:PORT URL", srv.url)
	}
	expect(t, oecp(t, srv, "get", "--token-file", tokenFile), 0, []string{"phase:"}, nil)
}

// TestServeTLS: --tls-cert/--tls-key serve wss://, and the CLI reaches it
// with --ca-file.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, certFile, keyFile)
	url := startServer(t, "--tls-cert", certFile, "--tls-key", keyFile).url
	if !strings.HasPrefix(url, "wss://") {
		t.Fatalf("oecp serve announced %s, want a wss:// URL", url)
	}
	ok := oecp(t, nil, "get", "--server", url, "--ca-file", certFile)
	if ok.code != exitOK || !strings.Contains(ok.stdout, "phase:") {
		t.Fatalf("get over wss with --ca-file: exit %d\n%s\n%s", ok.code, ok.stdout, ok.stderr)
	}
	// Without the CA the certificate is not trusted: a connection failure.
	bad := oecp(t, nil, "get", "--server", url)
	if bad.code != exitUsage || !strings.Contains(bad.stderr, "--ca-file") {
		t.Fatalf("get over wss without the CA: exit %d, want 2 and a hint to --ca-file\n%s", bad.code, bad.stderr)
	}
	// A ws:// URL to the TLS port says so.
	plain := oecp(t, nil, "get", "--server", "ws://"+strings.TrimPrefix(url, "wss://"))
	if plain.code != exitUsage || !strings.Contains(plain.stderr, "use wss://") {
		t.Fatalf("get with ws:// against a TLS port: exit %d\n%s", plain.code, plain.stderr)
	}
}

func writeSelfSigned(t *testing.T, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "oecp test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCLIFixtureBackendHasNoEngine: a method the fixture backend lacks is
// refused with a line that says so.
func TestCLIFixtureBackendHasNoEngine(t *testing.T) {
	srv := startServer(t, "--backend", "fixture")
	expect(t, oecp(t, srv, "logs"), 1, nil, []string{"oecp logs refused: the server's backend does not support logs — a `oecp serve --backend fixture` server has no engine"})
}
