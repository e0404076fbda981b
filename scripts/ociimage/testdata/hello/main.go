// Command hello is a small program with one module dependency, for the
// tests of scripts/ociimage.
package main

import (
	"fmt"

	"github.com/creack/pty"
)

func main() { fmt.Println("hello", pty.ErrUnsupported != nil) }
