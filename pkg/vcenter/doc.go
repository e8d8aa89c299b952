// Package vcenter holds one client per configured vCenter: its SOAP and
// REST sessions, its health, and the rules that keep a site outage or a
// rejected password from hurting the others.
//
// A Pool builds one Client per vCenter and starts each on its own: a
// vCenter that is down, black-holed or refusing at start does not delay
// the others. A Client connects and logs in (credentials from a
// CredentialSource, re-read on every login), keeps its sessions alive,
// re-logs in when a session expires, and probes a vCenter that is down
// with an unauthenticated request so that its return is noticed within
// seconds. While it is down, calls through Do fail at once with an error
// wrapping ErrUnavailable, without network I/O; HealthChanged tells
// waiting loops when that changes. A login the vCenter rejects is not
// retried with the same credentials before the login back-off (vCenter SSO
// locks an account after a few failures); ErrLoginRejected says so.
// Every request and login is reported to an Observer (metrics), never with
// a secret.
package vcenter
