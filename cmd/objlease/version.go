package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

const versionDetail = `Prints the module version, the VCS revision it was built from (if known)
and the Go version. "objlease --version" does the same. With -o json it
prints {"version","revision","modified","go","os","arch"}.`

// versionInfo is what version prints with -o json.
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision"`
	Modified bool   `json:"modified"` // built from a tree with uncommitted changes
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

func (c *cli) versionCmd(fs *flagSet) action {
	asJSON := addOutput(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("version takes no arguments")
		}
		if *asJSON {
			return c.printJSON(buildVersion())
		}
		return c.printVersion()
	}
}

// version and revision are stamped by a release build (scripts/release.sh:
// -ldflags "-X main.version=v0.1.0 -X main.revision=<commit>"); without
// them the module's build information says what it can (the version when
// installed with go install …@v0.1.0, the commit in a checkout).
var version, revision string

// buildVersion reads the version from the stamps and the binary's build
// information.
func buildVersion() versionInfo {
	v := versionInfo{Version: "(devel)", Go: "unknown", OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Version, v.Go = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		v.Version = version
	}
	if revision != "" {
		v.Revision = revision
	}
	return v
}

func (c *cli) printVersion() error {
	v := buildVersion()
	rev := ""
	if v.Revision != "" {
		rev = " " + v.Revision
	}
	_, err := fmt.Fprintf(c.stdout, "objlease %s%s %s\n", v.Version, rev, v.Go)
	return err
}
