// Package secret holds sensitive strings (passwords) in a type that cannot be
// printed, logged or marshalled by accident.
//
// A Value prints as "[redacted]" with every fmt verb, marshals to JSON and YAML
// as "[redacted]" when set (and "" when empty), and never reveals its length.
// The only way to read it is Reveal, which makes every use easy to audit.
package secret
