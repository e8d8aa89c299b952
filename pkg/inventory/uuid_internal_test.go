package inventory

import (
	"encoding/hex"
	"strings"
	"testing"
)

// parseUUIDByHex is parseUUID as it was written first, with the standard
// library's decoder: the oracle of FuzzParseUUID.
func parseUUIDByHex(s string) (uuidKey, bool) {
	var k uuidKey
	s = strings.TrimSpace(s)
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return k, false
	}
	if _, err := hex.Decode(k[:], []byte(s[0:8]+s[9:13]+s[14:18]+s[19:23]+s[24:])); err != nil {
		return uuidKey{}, false
	}
	return k, true
}

// FuzzParseUUID: parseUUID agrees with the standard library's hex
// decoding on any input, and a lookup's key with the exported string
// functions (NormalizeUUID, SwapUUID) that other packages use.
func FuzzParseUUID(f *testing.F) {
	for _, s := range []string{"4211aaaa-0000-4000-8000-00000000dead", " 4211AAAA-0000-4000-8000-00000000DEAD\n",
		"4211aaaa-0000-4000-8000-00000000dea", "4211aaaa+0000-4000-8000-00000000dead", "4211aaag-0000-4000-8000-00000000dead", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseUUID(s)
		want, wok := parseUUIDByHex(s)
		if got != want || ok != wok {
			t.Errorf("parseUUID(%q) = %x, %v; the hex decoder says %x, %v", s, got, ok, want, wok)
		}
		lk, err := uuidLookup(s)
		if (err == nil) != ok || (NormalizeUUID(s) != "") != ok {
			t.Fatalf("%q: parseUUID %v, uuidLookup error %v, NormalizeUUID %q", s, ok, err, NormalizeUUID(s))
		}
		if !ok {
			return
		}
		keys, sw := lk.uuidStrings(), SwapUUID(s)
		if keys[0] != NormalizeUUID(s) || got.swap().String() != sw {
			t.Errorf("%q: key %v, swapped %s; NormalizeUUID %q, SwapUUID %q", s, keys, got.swap(), NormalizeUUID(s), sw)
		}
		if wantKeys := 1 + btoi(sw != keys[0]); len(keys) != wantKeys {
			t.Errorf("%q: keys %v, want %d (swapped %q)", s, keys, wantKeys, sw)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
