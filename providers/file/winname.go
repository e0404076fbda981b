package file

import (
	"fmt"
	"strings"
)

// windowsSegment returns why a key's path segment cannot name a file on
// Windows as written, or "": a backslash is a separator there (and would
// let a key climb out of the store's directory), a colon names an
// alternate data stream, a few more characters and control characters are
// refused by Win32, a trailing dot or space is dropped, and a device name
// (CON, NUL, COM1, ... with any extension) opens the device. It is plain
// string logic, so that it is tested on every platform.
func windowsSegment(seg string) string {
	if i := strings.IndexAny(seg, "\\:<>\"|?*"); i >= 0 {
		return fmt.Sprintf("key has a %q, which Windows does not allow in a file name", seg[i])
	}
	for _, r := range seg {
		if r < 0x20 {
			return "key contains a control character, which Windows does not allow in a file name"
		}
	}
	if strings.HasSuffix(seg, ".") || strings.HasSuffix(seg, " ") {
		return "key has a path segment ending in a dot or a space, which Windows drops"
	}
	base, _, _ := strings.Cut(seg, ".")
	switch b := strings.ToUpper(base); {
	case b == "CON" || b == "PRN" || b == "AUX" || b == "NUL",
		len(b) == 4 && (strings.HasPrefix(b, "COM") || strings.HasPrefix(b, "LPT")) && b[3] >= '1' && b[3] <= '9':
		return fmt.Sprintf("key has a path segment %q, a device name on Windows", seg)
	}
	return ""
}
