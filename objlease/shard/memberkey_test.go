package shard

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers/file"
)

// Every valid member name (a holder: 1 to 256 bytes of printable Unicode)
// maps to a key every store accepts; an ASCII name keeps the key it had.
// A name of 43 × "é" (86 bytes) used to escape to 258 bytes, over a file
// name's 255, and group join refused it with a message about a key the
// user never typed.
func TestMemberKeysFitEveryStore(t *testing.T) {
	names := []string{
		"worker-1", "host a:1?x", strings.Repeat("é", 43), strings.Repeat("é", 128),
		strings.Repeat("𝄞", 64), strings.Repeat("%", 256), "a" + strings.Repeat(" ", 254) + "b",
	}
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, n := range names {
		if err := objlease.CheckHolder(n); err != nil {
			t.Fatalf("test name %q is not a valid holder: %v", n, err)
		}
		key := MemberKey("groups/g", n)
		seg := strings.TrimPrefix(key, "groups/g/members/")
		if len(seg) > maxMemberSegment || len(key) > 1024 {
			t.Errorf("%q: key segment of %d bytes (key %d)", n, len(seg), len(key))
		}
		if other, dup := seen[key]; dup {
			t.Errorf("%q and %q share the key %q", n, other, key)
		}
		seen[key] = n
		if _, err := store.Create(context.Background(), key, []byte("{}"), nil); err != nil {
			t.Errorf("%q: the file store refuses its key: %v", n, err)
		}
		if isASCII(n) && seg != url.PathEscape(n) && len(url.PathEscape(n)) <= maxMemberSegment {
			t.Errorf("%q: key segment %q, want %q as before", n, seg, url.PathEscape(n))
		}
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
