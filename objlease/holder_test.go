package objlease_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/semaphore"
	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers/mem"
)

// A holder identity is printed one per row by list, inspect and watch: New
// refuses one that would split a row or hide in it, and says which
// character is wrong and where.
func TestHolderValidated(t *testing.T) {
	for _, tc := range []struct {
		holder string
		want   string // in the error; "" if accepted
	}{
		{"alice", ""},
		{"host-1/4242/be3f", ""},
		{"Zoë the ünïcode holder", ""},
		{"worker 7", ""},
		{strings.Repeat("x", 256), ""},
		{"alice\nbob", `U+000A at byte 5`},
		{"a\tb", `U+0009 at byte 1`},
		{"\x1b[31mred", `U+001B at byte 0`},
		{"del\x7f", `U+007F at byte 3`},
		{"zero\u200bwidth", `U+200B at byte 4`},
		{"bad\xffutf8", `not valid UTF-8 at byte 3`},
		{"   ", `only spaces`},
		{" alice", `leading or trailing space`},
		{"alice ", `leading or trailing space`},
		{strings.Repeat("x", 257), `257 bytes, more than 256`},
	} {
		_, err := objlease.New(mem.New(), "k", objlease.Options{Holder: tc.holder})
		if tc.want == "" {
			if err != nil {
				t.Errorf("holder %q refused: %v", tc.holder, err)
			}
			continue
		}
		if !errors.Is(err, objlease.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("holder %q: got %v, want ErrInvalidOptions saying %q", tc.holder, err, tc.want)
		}
		if err := objlease.CheckHolder(tc.holder); !errors.Is(err, objlease.ErrInvalidOptions) {
			t.Errorf("CheckHolder(%q) = %v, want ErrInvalidOptions", tc.holder, err)
		}
	}
}

// The packages that take a holder identity of their own refuse a bad one
// as New does.
func TestHolderValidatedEverywhere(t *testing.T) {
	const bad = "worker\n1"
	sess, err := objlease.NewSession(mem.New(), objlease.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := semaphore.New(sess, "slots", 2, objlease.Options{Holder: bad}); !errors.Is(err, objlease.ErrInvalidOptions) || !strings.Contains(err.Error(), "U+000A at byte 6") {
		t.Errorf("semaphore: %v, want ErrInvalidOptions naming the newline", err)
	}
	_, err = shard.New(sess, "group", objlease.Options{}, shard.Config{Member: bad, Shards: []string{"a"}, Work: func(context.Context, *shard.Shard) {}})
	if !errors.Is(err, objlease.ErrInvalidOptions) || !strings.Contains(err.Error(), "U+000A at byte 6") {
		t.Errorf("shard: %v, want ErrInvalidOptions naming the newline", err)
	}
}
