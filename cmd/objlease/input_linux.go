package main

import (
	"os"
	"syscall"
)

// pseudoFile tells a file of /proc or /sys, whose size says nothing of
// what a read returns (0, or a page), from a file that holds its bytes.
func pseudoFile(f *os.File) bool {
	var st syscall.Statfs_t
	if syscall.Fstatfs(int(f.Fd()), &st) != nil {
		return false
	}
	const procMagic, sysfsMagic = 0x9fa0, 0x62656572
	return st.Type == procMagic || st.Type == sysfsMagic
}
