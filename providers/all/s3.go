//go:build !objlease_no_s3

package all

import _ "github.com/objlease/objlease/providers/s3store"
