package file

import "testing"

// On Windows a key segment must be a name Win32 can hold as written: a
// backslash would be a separator (and "a\..\..\x" a way out of the
// store's directory), a colon names an alternate data stream, and device
// names open the device.
func TestWindowsSegments(t *testing.T) {
	for _, seg := range []string{`a\b`, `..\x`, "a:b", "con", "NUL.txt", "com1", "lpt9.log", "a.", "a ", "a<b", `a"b`, "a|b", "a?b", "a*b", "a>b", "a\x01b"} {
		if why := windowsSegment(seg); why == "" {
			t.Errorf("segment %q: allowed, want refused on Windows", seg)
		}
	}
	for _, seg := range []string{"nightly", "a.b", "console", "com10", "lease-1", "ñandú", ".hidden", "a b"} {
		if why := windowsSegment(seg); why != "" {
			t.Errorf("segment %q: refused (%s), want allowed", seg, why)
		}
	}
}
