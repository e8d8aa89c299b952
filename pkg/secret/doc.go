// Package secret holds sensitive strings (passwords, private keys, tokens)
// in a type that cannot be printed, logged or marshalled by accident, and
// the credential modes built from them.
//
// A Value prints as "[redacted]" with every fmt verb, marshals to JSON and YAML
// as "[redacted]" when set (and "" when empty), and never reveals its length.
// The only way to read it is Reveal, which makes every use easy to audit.
//
// Credentials is one vCenter's credentials in one mode: a Password, a
// Certificate (a solution user's certificate and private key) or a
// SharedSession (a session manager's URL and bearer token). FromUserPassword
// applies the reference CCM's rule (a PEM username is a certificate) and
// refuses what would send a private key as a password.
package secret
