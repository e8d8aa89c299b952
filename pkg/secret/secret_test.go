package secret

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const sentinel = "S3ntinel-P@ss=word"

type holder struct {
	Name     string
	Password Value
	hidden   Value
}

func TestValueNeverPrints(t *testing.T) {
	v := New(sentinel)
	h := holder{Name: "vc", Password: v, hidden: v}
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{"json": string(js)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s", "%T"} {
		outputs["value "+verb] = fmt.Sprintf(verb, v)
		outputs["struct "+verb] = fmt.Sprintf(verb, h)
		outputs["pointer "+verb] = fmt.Sprintf(verb, &h)
	}
	for name, out := range outputs {
		if strings.Contains(out, sentinel) || strings.Contains(out, fmt.Sprintf("%x", sentinel)) {
			t.Errorf("%s reveals the secret: %s", name, out)
		}
		if strings.Contains(out, strings.Repeat("*", len(sentinel))) {
			t.Errorf("%s reveals the secret's length: %s", name, out)
		}
	}
	if got := v.Reveal(); got != sentinel {
		t.Fatalf("Reveal() = %q, want the original", got)
	}
}

func TestEmptyValue(t *testing.T) {
	var v Value
	if v.IsSet() || v.Reveal() != "" || v.String() != "" {
		t.Fatalf("zero Value should be empty, got IsSet=%v String=%q", v.IsSet(), v.String())
	}
	if New("").IsSet() {
		t.Fatal(`New("") should be empty`)
	}
	if !New("a").Equal(New("a")) || New("a").Equal(New("b")) {
		t.Fatal("Equal compares content")
	}
}
