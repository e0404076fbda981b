// Package bucketname checks bucket and container names against a store's
// naming rule before any request is sent, so that a name the store cannot
// have is reported as the bucket's fault, not the key's.
package bucketname

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/objlease/objlease/providers/driver"
)

// Rule is one store's rule for the names of its buckets (or containers).
type Rule struct {
	Store string // the store's name in messages: "S3", "GCS", "Azure"
	Word  string // what the store calls a bucket: "bucket", "container"
	// Min and Max bound the name's length in characters (all ASCII).
	Min, Max int
	// DottedMax, if set, is the longest a name with dots may be, each
	// dot-separated part at most Max (GCS).
	DottedMax int
	// Allowed are the characters allowed besides lowercase letters and
	// digits, which every name must begin and end with.
	Allowed string
	// NoDoubleDot refuses "..", NoDoubleHyphen "--"; NoIP refuses a name
	// formed like an IPv4 address.
	NoDoubleDot, NoDoubleHyphen, NoIP bool
	// Special are names allowed whatever the rule says (Azure's $root).
	Special []string
	// Summary is the rule in words, for messages.
	Summary string
}

// Check returns nil if name follows r, else an error matching
// driver.ErrInvalidBucket that names the bucket, says what is wrong and
// states the rule.
func (r Rule) Check(name string) error {
	for _, s := range r.Special {
		if name == s {
			return nil
		}
	}
	why := r.problem(name)
	if why == "" {
		return nil
	}
	return &nameError{fmt.Sprintf("%s %q is not a valid %s %s name: %s; %s", r.Word, name, r.Store, r.Word, why, r.Summary)}
}

// nameError is a name refused by a rule.
type nameError struct{ msg string }

func (e *nameError) Error() string { return e.msg }
func (e *nameError) Unwrap() error { return driver.ErrInvalidBucket }

func (r Rule) problem(name string) string {
	max := r.Max
	if r.DottedMax > 0 && strings.Contains(name, ".") {
		max = r.DottedMax
	}
	if n := len(name); n < r.Min || n > max {
		return fmt.Sprintf("it has %d characters", n)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte(r.Allowed, c) >= 0) {
			if 'A' <= c && c <= 'Z' {
				return fmt.Sprintf("it has the capital %q at byte %d", name[i:i+1], i)
			}
			return fmt.Sprintf("it has %q at byte %d", name[i:i+1], i)
		}
	}
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return "it must begin and end with a lowercase letter or a digit"
	}
	switch {
	case r.NoDoubleDot && strings.Contains(name, ".."):
		return "it has two dots in a row"
	case r.NoDoubleHyphen && strings.Contains(name, "--"):
		return "it has two hyphens in a row"
	case r.NoIP && isIPv4(name):
		return "it is formed like an IP address"
	}
	if r.DottedMax > 0 {
		for _, part := range strings.Split(name, ".") {
			if len(part) > r.Max {
				return fmt.Sprintf("its dot-separated part %q has %d characters, more than %d", part, len(part), r.Max)
			}
		}
	}
	return ""
}

func alnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}
