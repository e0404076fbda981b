//go:build !objlease_no_azblob

package all

import _ "github.com/objlease/objlease/providers/azurestore"
