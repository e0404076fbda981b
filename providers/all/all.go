// Package all registers every objlease store provider with providers.Open,
// so that a program importing it accepts URLs of every scheme: file, mem,
// s3, gs and azblob.
//
//	import _ "github.com/objlease/objlease/providers/all"
package all

import (
	_ "github.com/objlease/objlease/providers/azurestore"
	_ "github.com/objlease/objlease/providers/file"
	_ "github.com/objlease/objlease/providers/gcsstore"
	_ "github.com/objlease/objlease/providers/mem"
	_ "github.com/objlease/objlease/providers/s3store"
)
