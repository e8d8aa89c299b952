package collectorxml

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// scanner reads the XML of one response, strictly: a construct it does
// not know ends the scan (ok false), for govmomi's decoder to read
// instead. It never errs on the side of accepting: comments, CDATA,
// processing instructions after the declaration, DOCTYPE, a character
// reference to what is not an XML character, carriage returns and
// non-ASCII names all decline.
type scanner struct {
	b     []byte
	i     int
	sb    strings.Builder // text with entities, reused
	attrs []attr          // the last start tag's attributes, reused
}

// tag is a start tag: its name, as in the input, and its attributes,
// valid until the next start tag is read.
type tag struct {
	prefix, local []byte
	attrs         []attr
	empty         bool // <x/>
}

type attr struct {
	prefix, local []byte // xmlns:xsi -> xmlns, xsi; xmlns -> "", xmlns
	raw           []byte // the value, escaped
}

// is reports whether the name is prefix:local (local when prefix is "").
func is(gotPrefix, gotLocal []byte, prefix, local string) bool {
	return string(gotPrefix) == prefix && string(gotLocal) == local
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// skipSpace skips white space between elements (a carriage return
// declines: the XML decoder rewrites it).
func (s *scanner) skipSpace() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

func (s *scanner) eof() bool { return s.i >= len(s.b) }

// declarations are the XML declarations a response may begin with.
var declarations = [][]byte{
	[]byte(`<?xml version="1.0" encoding="UTF-8"?>`),
	[]byte(`<?xml version="1.0" encoding="utf-8"?>`),
	[]byte(`<?xml version="1.0"?>`),
}

// declaration skips the XML declaration, if it is one of declarations.
func (s *scanner) declaration() bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte("<?")) {
		return true // none
	}
	for _, d := range declarations {
		if bytes.HasPrefix(s.b[s.i:], d) {
			s.i += len(d)
			return true
		}
	}
	return false
}

// name reads an XML name of ASCII letters, digits, '_', '-' and '.', with
// at most one ':' splitting prefix and local part.
func (s *scanner) name() (prefix, local []byte, ok bool) {
	start, colon := s.i, -1
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '_':
		case '0' <= c && c <= '9', c == '-', c == '.':
			if s.i == start || s.i == colon+1 {
				return nil, nil, false
			}
		case c == ':':
			if colon >= 0 || s.i == start {
				return nil, nil, false
			}
			colon = s.i
		default:
			goto done
		}
		s.i++
	}
done:
	switch {
	case s.i == start, colon == s.i-1:
		return nil, nil, false
	case colon < 0:
		return nil, s.b[start:s.i], true
	}
	return s.b[start:colon], s.b[colon+1 : s.i], true
}

// startTag reads a start tag. The caller checks its name.
func (s *scanner) startTag() (tag, bool) {
	var t tag
	s.attrs = s.attrs[:0]
	if s.i+1 >= len(s.b) || s.b[s.i] != '<' {
		return t, false
	}
	s.i++
	var ok bool
	if t.prefix, t.local, ok = s.name(); !ok {
		return t, false
	}
	for {
		sp := s.i
		s.skipSpace()
		if s.eof() {
			return t, false
		}
		switch s.b[s.i] {
		case '>':
			s.i++
			t.attrs = s.attrs
			return t, true
		case '/':
			if s.i+1 < len(s.b) && s.b[s.i+1] == '>' {
				s.i += 2
				t.empty = true
				t.attrs = s.attrs
				return t, true
			}
			return t, false
		}
		if sp == s.i {
			return t, false // attributes are separated by white space
		}
		var a attr
		if a.prefix, a.local, ok = s.name(); !ok {
			return t, false
		}
		s.skipSpace()
		if s.eof() || s.b[s.i] != '=' {
			return t, false
		}
		s.i++
		s.skipSpace()
		if s.eof() || (s.b[s.i] != '"' && s.b[s.i] != '\'') {
			return t, false
		}
		q := s.b[s.i]
		s.i++
		end := bytes.IndexByte(s.b[s.i:], q)
		if end < 0 {
			return t, false
		}
		a.raw = s.b[s.i : s.i+end]
		s.i += end + 1
		if bytes.IndexByte(a.raw, '<') >= 0 || bytes.IndexByte(a.raw, '\t') >= 0 || bytes.IndexByte(a.raw, '\n') >= 0 {
			return t, false // the decoder would reject or normalize them
		}
		if !s.check(a.raw) {
			return t, false
		}
		for _, b := range s.attrs {
			if bytes.Equal(b.prefix, a.prefix) && bytes.Equal(b.local, a.local) {
				return t, false
			}
		}
		s.attrs = append(s.attrs, a)
	}
}

// endTag reads the end tag of t.
func (s *scanner) endTag(t tag) bool {
	if t.empty {
		return true
	}
	if !bytes.HasPrefix(s.b[s.i:], []byte("</")) {
		return false
	}
	s.i += 2
	prefix, local, ok := s.name()
	if !ok || !bytes.Equal(prefix, t.prefix) || !bytes.Equal(local, t.local) {
		return false
	}
	s.skipSpace()
	if s.eof() || s.b[s.i] != '>' {
		return false
	}
	s.i++
	return true
}

// text reads the character data of a leaf element up to its end tag,
// unescaped: an element inside it declines.
func (s *scanner) text(t tag) (string, bool) {
	raw, ok := s.rawText(t)
	if !ok {
		return "", false
	}
	return s.unescape(raw), true
}

// rawText reads the character data of a leaf element up to its end tag,
// escaped.
func (s *scanner) rawText(t tag) ([]byte, bool) {
	if t.empty {
		return nil, true
	}
	end := bytes.IndexByte(s.b[s.i:], '<')
	if end < 0 {
		return nil, false
	}
	raw := s.b[s.i : s.i+end]
	s.i += end
	if !s.check(raw) || !s.endTag(t) {
		return nil, false
	}
	return raw, true
}

// check reports whether raw is text the decoder reads as it stands, but
// for the five predefined entities and character references (the
// simulator writes a quote as &#34;). Any other '&',
// a carriage return, "]]>", a control character or a byte that is not
// valid UTF-8 declines.
func (s *scanner) check(raw []byte) bool {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '&':
			n, _ := reference(raw[i:])
			if n == 0 {
				return false
			}
			i += n
		case c == ']' && bytes.HasPrefix(raw[i:], []byte("]]>")):
			return false
		case c < 0x20 && c != '\t' && c != '\n':
			return false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError || r == 0xFFFE || r == 0xFFFF {
				return false
			}
			i += n
		}
	}
	return true
}

// unescape returns raw, checked, with its entity and character
// references replaced.
func (s *scanner) unescape(raw []byte) string {
	if bytes.IndexByte(raw, '&') < 0 {
		return string(raw)
	}
	s.sb.Reset()
	for len(raw) > 0 {
		amp := bytes.IndexByte(raw, '&')
		if amp < 0 {
			s.sb.Write(raw)
			break
		}
		s.sb.Write(raw[:amp])
		n, r := reference(raw[amp:]) // checked: one
		s.sb.WriteRune(r)
		raw = raw[amp+n:]
	}
	return s.sb.String()
}

// entities are the predefined entities, the only ones a response may
// hold.
var entities = [...]struct {
	name string
	char byte
}{{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&apos;", '\''}, {"&quot;", '"'}}

// reference returns the length of the predefined entity or the
// character reference (&#34; or &#x22;) raw begins with, and the
// character it stands for; 0 if raw begins with neither, or with a
// reference to what is not an XML character (the decoder rejects those,
// but for surrogates, which it reads as U+FFFD: declined too).
func reference(raw []byte) (int, rune) {
	for _, e := range entities {
		if bytes.HasPrefix(raw, []byte(e.name)) {
			return len(e.name), rune(e.char)
		}
	}
	if !bytes.HasPrefix(raw, []byte("&#")) {
		return 0, 0
	}
	i, base := 2, 10
	if len(raw) > 2 && raw[2] == 'x' {
		i, base = 3, 16
	}
	j := i
	for j < len(raw) && j-i <= 8 && digit(raw[j], base) {
		j++
	}
	if j == i || j-i > 8 || j >= len(raw) || raw[j] != ';' {
		return 0, 0
	}
	n, err := strconv.ParseUint(string(raw[i:j]), base, 32)
	if err != nil || !xmlChar(n) {
		return 0, 0
	}
	return j + 1, rune(n)
}

func digit(c byte, base int) bool {
	return '0' <= c && c <= '9' || base == 16 && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F')
}

// xmlChar reports whether n is a character XML allows (its Char production).
func xmlChar(n uint64) bool {
	return n == 0x9 || n == 0xA || n == 0xD || 0x20 <= n && n <= 0xD7FF || 0xE000 <= n && n <= 0xFFFD || 0x10000 <= n && n <= 0x10FFFF
}
