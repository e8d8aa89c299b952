package ccmproc

import (
	"reflect"
	"testing"
)

func TestGroupStacks(t *testing.T) {
	dump := `I1124 log line before
SIGQUIT: quit
PC=0x47a4e1 m=0 sigcode=0

goroutine 0 gp=0x1 m=0 mp=0x2 [idle]:
runtime.futex(0x1)
	/usr/local/go/src/runtime/os_linux.go:1 +0x1

goroutine 7 [select]:
net/http.(*persistConn).readLoop(0xc000)
	/usr/local/go/src/net/http/transport.go:2395 +0xc65
created by net/http.(*Transport).dialConn in goroutine 6
	/usr/local/go/src/net/http/transport.go:1944 +0x174c

goroutine 8 [select]:
net/http.(*persistConn).readLoop(0xc001)
	/usr/local/go/src/net/http/transport.go:2395 +0xc65
created by net/http.(*Transport).dialConn in goroutine 6
	/usr/local/go/src/net/http/transport.go:1944 +0x174c

goroutine 9 [chan receive]:
main.wait(...)
	/src/main.go:10
main.main()
	/src/main.go:5 +0x1
`
	got := GroupStacks(dump)
	want := []StackGroup{
		{Count: 2, Stack: []string{"net/http.(*persistConn).readLoop"}},
		{Count: 1, Stack: []string{"main.wait", "main.main"}},
		{Count: 1, Stack: []string{"runtime.futex"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GroupStacks = %+v, want %+v", got, want)
	}
}
