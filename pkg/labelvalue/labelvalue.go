// Package labelvalue makes a vSphere name a valid Kubernetes label value,
// deterministically: the one policy for the labels that say where a VM is
// (docs/configuration.md, "Label values").
package labelvalue

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Of makes s a valid label value: characters other than letters, digits,
// '-', '_' and '.' become '-', leading and trailing non-alphanumerics are
// dropped, and a value longer than 63 characters keeps its first 54 and
// ends with '-' and 8 hex digits of the SHA-256 of s, so that two long
// names stay apart. A valid value is returned as it is. Zone, region and
// the other values components match exactly are refused when invalid,
// never rewritten: this is for names of where a VM is.
func Of(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			b[i] = '-'
		}
	}
	out := strings.TrimFunc(string(b), func(r rune) bool { return !isAlnum(byte(r)) })
	if len(out) > validation.LabelValueMaxLength {
		sum := sha256.Sum256([]byte(s))
		out = strings.TrimRightFunc(out[:54], func(r rune) bool { return !isAlnum(byte(r)) }) + "-" + hex.EncodeToString(sum[:4])
	}
	return out
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
