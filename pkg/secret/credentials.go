package secret

// Credentials is a username and password for one vCenter. It lives here,
// beside Value, so that the packages that use credentials (vcenter) need
// not import the package that loads them (credentials, with client-go).
type Credentials struct {
	Username string
	Password Value
}

// Equal reports whether both fields match.
func (c Credentials) Equal(o Credentials) bool {
	return c.Username == o.Username && c.Password.Equal(o.Password)
}
