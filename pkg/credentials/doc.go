// Package credentials answers "which credentials for vCenter X" (a
// password, a solution user's certificate or a session manager, see
// secret.Credentials), from Kubernetes Secrets, a secrets directory or the
// cloud-config.
//
// Sources, in order of precedence for one vCenter (config.Credentials lists
// which are configured):
//
//  1. the vCenter's own Secret (vcenter.<name>.secretName),
//  2. the global Secret (global.secretName),
//  3. the secrets directory (global.secretsDirectory),
//  4. inline user/password.
//
// Secret data (and the files of a secrets directory) use the reference CCM's
// keys: "<server>.username" / "<server>.password", or the IPv6-safe
// "server_<id>" / "username_<id>" / "password_<id>", and
// "<server>.vc-session-manager-url" / "<server>.vc-session-manager-token". ParseData reads them:
// unknown keys are ignored with a warning naming the key; a username without
// its password (or the reverse) is an error naming the key and invalidates
// only that server's entry.
package credentials
