package main

import "testing"

// TestRememberedKeysAreSeparatedByIdentity: the same --idempotency-key on
// the same server under two tokens is remembered in two places, so one
// identity never replays another's preconditions.
func TestRememberedKeysAreSeparatedByIdentity(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	file := func(token string) string {
		t.Setenv("OECP_TOKEN", token)
		c := &cli{server: "ws://127.0.0.1:7300/oecp", idemKey: "k"}
		f, err := c.keyFile()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	alice, bob := file("alice-token"), file("bob-token")
	if alice == bob {
		t.Fatalf("both identities remember key k in %s", alice)
	}
	if again := file("alice-token"); again != alice {
		t.Fatalf("one identity, two places: %s and %s", alice, again)
	}
}
