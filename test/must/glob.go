package must

import (
	"path/filepath"
	"testing"
)

// Glob returns the files matching pattern, and fails the test at once when
// the pattern is malformed or matches nothing: a table of fixtures that is
// empty or moved must not pass on zero cases.
func Glob(t testing.TB, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatalf("glob %s: %v", pattern, err)
	}
	if len(files) == 0 {
		t.Fatalf("no file matches %s: the fixtures are missing or moved", pattern)
	}
	return files
}
