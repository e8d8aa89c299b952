package vcenter

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/vmware/govmomi/vim25/methods"
)

func TestMethodNames(t *testing.T) {
	if got := soapMethod(&methods.RetrievePropertiesExBody{}); got != "RetrievePropertiesEx" {
		t.Errorf("soapMethod = %q", got)
	}
	cases := map[string]string{
		"POST /rest/com/vmware/cis/session":                                                       "session:post",
		"POST /rest/com/vmware/cis/session?~action=get":                                           "session:get",
		"GET /rest/com/vmware/cis/tagging/category":                                               "tagging/category:get",
		"GET /rest/com/vmware/cis/tagging/tag/id:urn:vmomi:InventoryServiceTag:1234:GLOBAL":       "tagging/tag:get",
		"POST /rest/com/vmware/cis/tagging/tag-association?~action=list-attached-tags-on-objects": "tagging/tag-association:list-attached-tags-on-objects",
		"POST /rest/com/vmware/cis/tagging/tag/id:urn:x?~action=list-tags-for-category":           "tagging/tag:list-tags-for-category",
	}
	for in, want := range cases {
		var method, target string
		for i := range in {
			if in[i] == ' ' {
				method, target = in[:i], in[i+1:]
				break
			}
		}
		u, err := url.Parse("https://vc" + target)
		if err != nil {
			t.Fatal(err)
		}
		if got := restMethod(&http.Request{Method: method, URL: u}); got != want {
			t.Errorf("restMethod(%s) = %q, want %q", in, got, want)
		}
	}
}
