package shard

// This file holds where a group's records live: the keys of its members
// and shards under the group's prefix.

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"unicode/utf8"
)

// MembersPrefix returns the key prefix of a group's membership records.
func MembersPrefix(prefix string) string { return join(prefix, "members/") }

// ShardsPrefix returns the key prefix of a group's shard records.
func ShardsPrefix(prefix string) string { return join(prefix, "shards/") }

// ShardKey returns the key of a shard's lease record.
func ShardKey(prefix, id string) string { return ShardsPrefix(prefix) + id }

// MemberKey returns the key of a member's heartbeat record. The name is
// its last path segment, with the ASCII characters a URL path escapes
// written as %XX (an ASCII name has the key it always had) and other
// Unicode as it is. A name whose segment would be longer than
// maxMemberSegment bytes is cut and followed by a hash of the whole name,
// so that every valid holder name (at most 256 bytes) fits every store: a
// file store's 255-byte path segment, S3's and GCS's 1,024-byte key.
// Members are named by their records, never by their keys.
func MemberKey(prefix, member string) string {
	return MembersPrefix(prefix) + memberSegment(member)
}

// maxMemberSegment leaves room under a file system's 255-byte name for
// the file store's own prefixes (.objlease-attrs-new.).
const maxMemberSegment = 200

func memberSegment(member string) string {
	var b strings.Builder
	cut := -1 // where the segment passed the length a hashed one keeps
	for _, r := range member {
		if r < utf8.RuneSelf {
			b.WriteString(url.PathEscape(string(r)))
		} else {
			b.WriteRune(r)
		}
		if cut < 0 && b.Len() > maxMemberSegment-hashedSuffix {
			cut = b.Len() - len(url.PathEscape(string(r)))
			if r >= utf8.RuneSelf {
				cut = b.Len() - utf8.RuneLen(r)
			}
		}
	}
	if b.Len() <= maxMemberSegment {
		return b.String()
	}
	sum := sha256.Sum256([]byte(member))
	return b.String()[:cut] + "~" + hex.EncodeToString(sum[:8])
}

// hashedSuffix is the length of "~" and 16 hex digits.
const hashedSuffix = 17

func join(prefix, sub string) string {
	if prefix == "" || strings.HasSuffix(prefix, "/") {
		return prefix + sub
	}
	return prefix + "/" + sub
}
