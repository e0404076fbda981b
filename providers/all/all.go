// Package all registers every objlease store provider with providers.Open,
// so that a program importing it accepts URLs of every scheme: file, mem,
// s3, gs and azblob.
//
//	import _ "github.com/objlease/objlease/providers/all"
//
// A build tag leaves a cloud store out, and its SDK with it (sizes of the
// stripped linux/amd64 CLI in the README): objlease_no_gcs (the GCS SDK,
// with gRPC and its xDS support, is two thirds of the CLI),
// objlease_no_azblob, objlease_no_s3.
package all

import (
	_ "github.com/objlease/objlease/providers/file"
	_ "github.com/objlease/objlease/providers/mem"
)
