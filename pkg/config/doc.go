// Package config reads, defaults and validates the cloud-config of the vSphere
// cloud-controller-manager.
//
// # One model, two readers
//
// Parse reads either format into the same typed Config:
//
//   - YAML (the primary format): the schema of the reference CCM
//     (global, vcenter.<name>, labels, nodes) plus documented extensions.
//   - INI (legacy vsphere.conf): [Global], [VirtualCenter "..."], [Labels] and
//     [Nodes] with kebab-case keys and gcfg quoting rules.
//
// The format is detected from the content, never guessed by trial: a file
// whose first line that is neither blank nor a comment starts with "[" is INI,
// anything else is YAML. Errors are reported for the detected format only.
//
// # Strict, complete error reports
//
// Unknown keys, type mismatches, invalid values and cross-field problems are
// all collected and returned together as Errors. Each Diagnostic names the
// file and line (or the environment variable) the value came from, the field
// path in the YAML schema (for example vcenter["site-a"].port) and, for
// misspelled keys, a suggestion.
//
// # Pipeline
//
//	bytes --(yaml|ini reader)--> tree --(decode)--> rawConfig
//	      --(ApplyEnv)--> rawConfig --(build: defaults, inheritance)--> Config
//	      --(validate)--> Config or Errors
//
// Defaults and the inheritance of global values into each vCenter happen in
// exactly one place (build.go). The package performs no I/O beyond what its
// caller hands it: Load reads one file, environment variables are passed in
// explicitly, and nothing is read from the process environment.
//
// Passwords are held as secret.Value and never appear in any printed or
// marshalled form of a Config.
package config
