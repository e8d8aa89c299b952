package main

import (
	"bufio"
	"io/fs"
	"path/filepath"
	"strings"
)

// subPathMount tells whether the file at path is a mount point of its own
// in the mount table fsys holds at proc/self/mountinfo: how a volume's
// subPath (or a bind mount of one file) reaches a container. Such a file
// is bound to the file the volume held when the container started: the
// kubelet's atomic updates of a ConfigMap or Secret volume swap a symlink
// in the volume's directory and never reach it. It returns the mount's
// source (its root within its filesystem), "" when path is not one.
func subPathMount(fsys fs.FS, path string) string {
	f, err := fsys.Open("proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	want := filepath.Clean(path)
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		// ID parent major:minor root mount-point options ... - type source super
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		if unescapeMount(fields[4]) == want {
			return unescapeMount(fields[3])
		}
	}
	return ""
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, \011,
// \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}
