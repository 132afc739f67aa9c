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
// tokens and TLS (or an explicit --insecure-plaintext).
func TestServeRefusesUnsafeNonLoopbackListen(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token":"t","principal":"p","tenant":"a","expiresAt":"2999-01-01T00:00:00Z"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, "--auth-tokens"},
		{[]string{"--listen", "0.0.0.0:0", "--auth-tokens", tokens}, "--insecure-plaintext"},
		{[]string{"--tls-cert", "x.pem"}, "go together"},
		{[]string{"--fault-delay", "get"}, "METHOD=DURATION"},
		{[]string{"--fault-delay", "nope=1s"}, "unknown method"},
		{[]string{"--sync", "sometimes"}, "--sync"},
		{[]string{"--backend", "fixture", "--store", "sqlite"}, "memory"},
	} {
		r := oecp(t, nil, append([]string{"serve", "--store", "memory"}, c.args...)...)
		if c.args[0] == "--backend" {
			r = oecp(t, nil, append([]string{"serve"}, c.args...)...)
		}
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want exit 2 mentioning %q", c.args, r.code, r.stderr, c.want)
		}
	}
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
	if bad.code != exitUsage {
		t.Fatalf("get over wss without the CA: exit %d, want 2\n%s", bad.code, bad.stderr)
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
