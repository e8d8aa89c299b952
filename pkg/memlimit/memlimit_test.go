package memlimit

import (
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

func TestPlan(t *testing.T) {
	const (
		v2 = "sys/fs/cgroup/memory.max"
		v1 = "sys/fs/cgroup/memory/memory.limit_in_bytes"
	)
	mib512 := int64(512 << 20)
	for _, tc := range []struct {
		name      string
		env       map[string]string
		files     map[string]string
		want      Settings
		wantInLog string
	}{
		{name: "no cgroup files (not in a container)", want: Settings{GCPercent: 50}, wantInLog: "GOGC=50, no memory limit"},
		{name: "cgroup v2 without a limit", files: map[string]string{v2: "max\n"}, want: Settings{GCPercent: 50}},
		{name: "cgroup v2, the chart's 512 MiB", files: map[string]string{v2: "536870912\n"},
			want:      Settings{GCPercent: 100, MemoryLimit: mib512 / 100 * 90, Source: "/" + v2},
			wantInLog: "GOGC=100, soft memory limit 460 MiB (90% of /sys/fs/cgroup/memory.max)"},
		{name: "cgroup v1 without a limit (the page-aligned maximum)", files: map[string]string{v1: "9223372036854771712\n"}, want: Settings{GCPercent: 50}},
		{name: "cgroup v1 with a limit", files: map[string]string{v1: "268435456"},
			want: Settings{GCPercent: 100, MemoryLimit: (256 << 20) / 100 * 90, Source: "/" + v1}},
		{name: "v2 says no limit: v1's file is not read", files: map[string]string{v2: "max", v1: "268435456"}, want: Settings{GCPercent: 50}},
		{name: "unreadable limit", files: map[string]string{v2: "lots"}, want: Settings{GCPercent: 50}},
		{name: "GOGC set: kept, the limit still applied", env: map[string]string{"GOGC": "200"}, files: map[string]string{v2: "536870912"},
			want: Settings{GCPercent: -1, MemoryLimit: mib512 / 100 * 90, Source: "/" + v2}, wantInLog: "GOGC from the environment"},
		{name: "GOMEMLIMIT set: the runtime's, GOGC=100", env: map[string]string{"GOMEMLIMIT": "300MiB"}, files: map[string]string{v2: "536870912"},
			want: Settings{GCPercent: 100, Source: "GOMEMLIMIT"}, wantInLog: "GOGC=100, memory limit from GOMEMLIMIT"},
		{name: "GOMEMLIMIT=off: no limit, not the cgroup's either", env: map[string]string{"GOMEMLIMIT": "off"}, files: map[string]string{v2: "536870912"},
			want: Settings{GCPercent: 50, Source: "GOMEMLIMIT=off"}, wantInLog: "GOGC=50, no memory limit (GOMEMLIMIT=off)"},
		{name: "set empty (a template's blank value) is unset", env: map[string]string{"GOMEMLIMIT": "", "GOGC": " "}, files: map[string]string{v2: "536870912"},
			want: Settings{GCPercent: 100, MemoryLimit: mib512 / 100 * 90, Source: "/" + v2}},
		{name: "both set: nothing changed", env: map[string]string{"GOMEMLIMIT": "300MiB", "GOGC": "off"},
			want: Settings{GCPercent: -1, Source: "GOMEMLIMIT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fstest.MapFS{}
			for name, data := range tc.files {
				root[name] = &fstest.MapFile{Data: []byte(data)}
			}
			got := plan(func(k string) string { return tc.env[k] }, root)
			if got != tc.want {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
			if !strings.Contains(got.String(), tc.wantInLog) {
				t.Errorf("log %q, want it to say %q", got, tc.wantInLog)
			}
		})
	}
}

// FuzzParseCgroupLimit: any content of a limit file is a limit that
// round-trips, or none; never a panic, never a limit of 0 or "unlimited".
func FuzzParseCgroupLimit(f *testing.F) {
	for _, s := range []string{"max\n", "536870912\n", "9223372036854771712", "-1", "0", " 42 ", "", "1e9"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := parseCgroupLimit(b)
		if !ok {
			return
		}
		if n <= 0 || n >= 1<<62 {
			t.Fatalf("%q: limit %d", b, n)
		}
		if s := strings.TrimSpace(string(b)); s != strconv.FormatInt(n, 10) && strings.TrimLeft(s, "+0") != strconv.FormatInt(n, 10) {
			t.Errorf("%q read as %d", b, n)
		}
	})
}
