package tick

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers/mem"
)

// The largest mark Done can write (Remembered ticks, each of MaxIDBytes of
// characters JSON writes with two bytes, each with a holder of 256 such
// bytes and the largest token) fits in MaxMarkSize: every mark written is
// read back.
func TestLargestMarkIsReadBack(t *testing.T) {
	var ticks []Mark
	for i := range Remembered {
		n := fmt.Sprint(i)
		ticks = append(ticks, Mark{Tick: n + strings.Repeat(`"`, MaxIDBytes-len(n)), Token: 1<<64 - 1,
			Holder: strings.Repeat(`\`, 256), DoneAt: time.Date(2026, 12, 4, 3, 0, 0, 123456789, time.FixedZone("", -11*3600))})
	}
	for _, tk := range ticks[:3] {
		if err := CheckID(tk.Tick); err != nil {
			t.Fatal(err)
		}
	}
	b, err := encode(ticks)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxMarkSize {
		t.Fatalf("the largest mark is %d bytes, more than the read bound %d", len(b), MaxMarkSize)
	}
	t.Logf("the largest mark is %d bytes (read bound %d)", len(b), MaxMarkSize)
	store := mem.New()
	if _, err := store.Create(t.Context(), Key("k"), b, map[string]string{fence.TokenKey: "1"}); err != nil {
		t.Fatal(err)
	}
	m, err := Read(t.Context(), store, "k")
	if err != nil || len(m.Ticks) != Remembered {
		t.Fatalf("reading the largest mark back: %v, %d ticks", err, len(m.Ticks))
	}
}
