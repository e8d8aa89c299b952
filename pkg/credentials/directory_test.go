package credentials

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A directory laid out like a mounted Secret volume: files are links into a
// ..data directory that kubelet swaps atomically.
func TestReadDirectoryMountedSecretLayout(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_11_22")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"vc.example.com.username": "u\n", "vc.example.com.password": "p"} {
		if err := os.WriteFile(filepath.Join(data, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vc.example.com.username", "vc.example.com.password"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	raw, err := ReadDirectory(dir)
	if err != nil {
		t.Fatal(err)
	}
	set, warnings, err := ParseData(raw)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("err %v, warnings %v", err, warnings)
	}
	if diff := cmp.Diff(Set{"vc.example.com": creds("u", "p")}, set); diff != "" {
		t.Error(diff)
	}
}

func TestReadDirectoryMissing(t *testing.T) {
	if _, err := ReadDirectory(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("want an error for a missing directory")
	}
}
