package config

import (
	"fmt"
	"strings"
)

// suggest returns "did you mean X?" for a misspelled key, or "" when no
// known key is close. It recognises the other format's spelling first
// (ca-file inside YAML, caFile inside INI), then case and separator
// differences, then small edit distances. echo reports whether the key
// may be shown: only when it is a known key up to case, separators or
// format, never for an edit-distance guess (a secret typed as a key may
// be close to a known one).
func suggest(format Format, key string, fields []schemaField) (hint string, echo bool) {
	other := FormatINI
	if format == FormatINI {
		other = FormatYAML
	}
	for _, f := range fields {
		if f.name(format) == "-" {
			continue
		}
		if o := f.name(other); o != "-" && strings.EqualFold(o, key) && !strings.EqualFold(f.name(format), key) {
			return fmt.Sprintf("did you mean %s? (%s is the %s spelling)", f.name(format), key, other), true
		}
	}
	norm := normalizeKey(key)
	for _, f := range fields {
		if n := f.name(format); n != "-" && normalizeKey(n) == norm {
			return fmt.Sprintf("did you mean %s?", n), true
		}
	}
	for _, f := range fields {
		if f.name(format) == "-" && normalizeKey(f.yamlName) == norm {
			return fmt.Sprintf("%s exists only in the YAML format; convert the file with `vsphere-cloud-controller-manager config convert`", f.yamlName), true
		}
	}
	best, bestDist := "", 1<<30
	for _, f := range fields {
		n := f.name(format)
		if n == "-" {
			continue
		}
		if dist := levenshtein(norm, normalizeKey(n)); dist < bestDist {
			best, bestDist = n, dist
		}
	}
	if best != "" && bestDist <= max(2, len(norm)/4) {
		return fmt.Sprintf("did you mean %s?", best), false
	}
	return "", false
}

// normalizeKey lowercases and drops separators: caFile, ca-file, CA_FILE -> cafile.
func normalizeKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r != '-' && r != '_' && r != ' ' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
