package credentials

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxFileSize bounds one credentials file; anything larger is not a
// username or password.
const maxFileSize = 64 << 10

// ReadDirectory reads a secrets directory: one file per key, named like the
// keys of a Secret (vc.example.com.username, ...). Names starting with "."
// (the ..data links of a mounted Secret volume, editor files) and
// sub-directories are skipped; symbolic links to files are followed.
func ReadDirectory(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("secrets directory %s: %w", dir, err)
	}
	data := map[string][]byte{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		info, err := os.Stat(path) // follows links
		if err != nil {
			return nil, fmt.Errorf("secrets directory %s: %w", dir, err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if info.Size() > maxFileSize {
			return nil, fmt.Errorf("secrets directory %s: file %s is %d bytes, too large for a credential", dir, name, info.Size())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("secrets directory %s: %w", dir, err)
		}
		data[name] = b
	}
	return data, nil
}
