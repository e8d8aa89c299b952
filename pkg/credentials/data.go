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

// The reference CCM's per-server key suffixes.
const (
	suffixUsername     = ".username"
	suffixPassword     = ".password"
	suffixSessionURL   = ".vc-session-manager-url"
	suffixSessionToken = ".vc-session-manager-token"
)

// entry is what the keys of one server say, before its mode is chosen.
type entry struct {
	user, pass, url, token             *string
	userKey, passKey, urlKey, tokenKey string
}

// ParseData reads Secret-style data. It returns every complete entry, a
// warning per ignored key, and an error (errors.Join of one per problem)
// for incomplete or unusable entries; a problem with one server never hides
// the others. No returned text contains a value, only key names.
//
// A server's mode follows the reference CCM's rule: a session-manager URL
// makes it a shared session (username and password are then unused); a
// username that is a PEM certificate makes the pair a certificate and its
// private key; otherwise it is a password login. A PEM private key given as
// the password of a username that is not a certificate is refused.
func ParseData(data map[string][]byte) (Set, []string, error) {
	byServer := map[string]*entry{}
	get := func(server string) *entry {
		if byServer[server] == nil {
			byServer[server] = &entry{}
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
		case hasServerSuffix(k, suffixUsername):
			p := get(strings.TrimSuffix(k, suffixUsername))
			p.user, p.userKey = &v, k
		case hasServerSuffix(k, suffixPassword):
			p := get(strings.TrimSuffix(k, suffixPassword))
			p.pass, p.passKey = &v, k
		case hasServerSuffix(k, suffixSessionURL):
			p := get(strings.TrimSuffix(k, suffixSessionURL))
			u := strings.TrimSpace(v)
			p.url, p.urlKey = &u, k
		case hasServerSuffix(k, suffixSessionToken):
			p := get(strings.TrimSuffix(k, suffixSessionToken))
			p.token, p.tokenKey = &v, k
		default:
			warnings = append(warnings, fmt.Sprintf("key %q ignored: expected <server>.username, <server>.password, <server>.vc-session-manager-url, <server>.vc-session-manager-token, server_<id>, username_<id> or password_<id>", k))
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
		c, warns, err := byServer[server].credentials(server)
		warnings = append(warnings, warns...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[server] = c
	}
	sort.Strings(warnings)
	return out, warnings, errors.Join(errs...)
}

func hasServerSuffix(k, suffix string) bool {
	return strings.HasSuffix(k, suffix) && len(k) > len(suffix)
}

// credentials chooses the entry's mode and checks it. Errors name keys,
// never values.
func (p *entry) credentials(server string) (secret.Credentials, []string, error) {
	var warns []string
	if p.url != nil && *p.url == "" && p.user != nil && p.pass != nil {
		// As the reference: an empty URL is no session manager, and the
		// username and password log in.
		warns = append(warns, fmt.Sprintf("server %q: key %q is empty, so the username and password are used", server, p.urlKey))
		p.url, p.token = nil, nil
	}
	if p.url != nil {
		if p.user != nil || p.pass != nil {
			warns = append(warns, fmt.Sprintf("server %q: key %q makes it a shared session, so its username and password are not used (as in the reference CCM); remove them", server, p.urlKey))
		}
		if *p.url == "" {
			return nil, warns, fmt.Errorf("key %q: empty session manager URL", p.urlKey)
		}
		var token secret.Value
		if p.token != nil {
			token = secret.New(strings.TrimSpace(*p.token))
		}
		s, err := secret.NewSharedSession(*p.url, token, "")
		if err != nil {
			return nil, warns, fmt.Errorf("key %q: %w", p.urlKey, err)
		}
		if s.Insecure() {
			warns = append(warns, fmt.Sprintf("server %q: key %q is a plain http URL: the bearer token and the session ticket travel in clear; use https", server, p.urlKey))
		}
		return s, warns, nil
	}
	switch {
	case p.token != nil:
		return nil, warns, fmt.Errorf("key %q has no matching %s%s key for server %q", p.tokenKey, server, suffixSessionURL, server)
	case p.user == nil:
		return nil, warns, fmt.Errorf("key %q has no matching username key for server %q", p.passKey, server)
	case p.pass == nil:
		return nil, warns, fmt.Errorf("key %q has no matching password key for server %q", p.userKey, server)
	case *p.user == "":
		return nil, warns, fmt.Errorf("key %q: empty username", p.userKey)
	case *p.pass == "":
		return nil, warns, fmt.Errorf("key %q: empty password", p.passKey)
	}
	c, err := secret.FromUserPassword(*p.user, secret.New(*p.pass))
	if err != nil {
		return nil, warns, fmt.Errorf("server %q, keys %q and %q: %w", server, p.userKey, p.passKey, err)
	}
	return c, warns, nil
}
