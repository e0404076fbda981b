//go:build !objlease_no_gcs

package all

import _ "github.com/objlease/objlease/providers/gcsstore"
