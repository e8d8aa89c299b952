package credentials

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/vsphere-ccm/vsphere-cloud-controller-manager/pkg/secret"
)

// Set is the credentials found in one Secret or directory, by server.
type Set map[string]secret.Credentials

// ParseData reads Secret-style data. It returns every complete entry, a
// warning per ignored key, and an error (errors.Join of one per problem)
// for incomplete entries; a problem with one server never hides the others.
// No returned text contains a value, only key names.
func ParseData(data map[string][]byte) (Set, []string, error) {
	type partial struct {
		user, pass       *string
		userKey, passKey string
	}
	byServer := map[string]*partial{}
	get := func(server string) *partial {
		if byServer[server] == nil {
			byServer[server] = &partial{}
		}
		return byServer[server]
	}
	ids := map[string]string{} // id -> server, from server_<id>
	var warnings []string
	var errs []error

	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if id, ok := strings.CutPrefix(k, "server_"); ok && id != "" {
			server := strings.TrimSpace(string(data[k]))
			if server == "" {
				errs = append(errs, fmt.Errorf("key %q: empty server name", k))
				continue
			}
			ids[id] = server
		}
	}
	for _, k := range keys {
		v := strings.TrimRight(string(data[k]), "\r\n")
		switch {
		case strings.HasPrefix(k, "server_") && len(k) > len("server_"):
			// handled above
		case strings.HasPrefix(k, "username_") || strings.HasPrefix(k, "password_"):
			kind, id, _ := strings.Cut(k, "_")
			server, ok := ids[id]
			if !ok {
				errs = append(errs, fmt.Errorf("key %q: no server_%s names the vCenter it belongs to", k, id))
				continue
			}
			p := get(server)
			if kind == "username" {
				p.user, p.userKey = &v, k
			} else {
				p.pass, p.passKey = &v, k
			}
		case strings.HasSuffix(k, ".username") && len(k) > len(".username"):
			p := get(strings.TrimSuffix(k, ".username"))
			p.user, p.userKey = &v, k
		case strings.HasSuffix(k, ".password") && len(k) > len(".password"):
			p := get(strings.TrimSuffix(k, ".password"))
			p.pass, p.passKey = &v, k
		default:
			warnings = append(warnings, fmt.Sprintf("key %q ignored: expected <server>.username, <server>.password, server_<id>, username_<id> or password_<id>", k))
		}
	}
	for id, server := range ids {
		if byServer[server] == nil {
			errs = append(errs, fmt.Errorf("key %q: no username_%s or password_%s", "server_"+id, id, id))
		}
	}

	out := Set{}
	servers := make([]string, 0, len(byServer))
	for s := range byServer {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for _, server := range servers {
		p := byServer[server]
		switch {
		case p.user == nil:
			errs = append(errs, fmt.Errorf("key %q has no matching username key for server %q", p.passKey, server))
		case p.pass == nil:
			errs = append(errs, fmt.Errorf("key %q has no matching password key for server %q", p.userKey, server))
		case *p.user == "":
			errs = append(errs, fmt.Errorf("key %q: empty username", p.userKey))
		case *p.pass == "":
			errs = append(errs, fmt.Errorf("key %q: empty password", p.passKey))
		default:
			out[server] = secret.Credentials{Username: *p.user, Password: secret.New(*p.pass)}
		}
	}
	sort.Strings(warnings)
	return out, warnings, errors.Join(errs...)
}
