// Package must ends a test at the first error of a step that has to
// succeed for the test to mean anything (setup, a helper's call).
package must

import "testing"

// OK fails the test at once if err is not nil.
func OK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
