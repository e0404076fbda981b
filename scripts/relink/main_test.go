package main

import (
	"slices"
	"testing"
)

func TestRelink(t *testing.T) {
	in := "See [cli](docs/cli.md#exit-codes), [license](LICENSE), [top](#install),\n" +
		"[go](https://go.dev/doc), ![img](docs/a.png) and [k8s](k8s/README.md).\n" +
		"[changes]: CHANGELOG.md\n[design]: docs/design.md\n"
	shipped := []string{"LICENSE", "CHANGELOG.md", "README.md"}
	out, dangling := relink(in, ".", "https://github.com/objlease/objlease/blob/v1.2.3/", func(p string) bool {
		return slices.Contains(shipped, p)
	})
	want := "See [cli](https://github.com/objlease/objlease/blob/v1.2.3/docs/cli.md#exit-codes), [license](LICENSE), [top](#install),\n" +
		"[go](https://go.dev/doc), ![img](https://github.com/objlease/objlease/blob/v1.2.3/docs/a.png) and [k8s](https://github.com/objlease/objlease/blob/v1.2.3/k8s/README.md).\n" +
		"[changes]: CHANGELOG.md\n[design]: https://github.com/objlease/objlease/blob/v1.2.3/docs/design.md\n"
	if out != want {
		t.Errorf("relinked:\n%s\nwant:\n%s", out, want)
	}
	if want := []string{"docs/cli.md#exit-codes", "docs/a.png", "k8s/README.md", "docs/design.md"}; !slices.Equal(dangling, want) {
		t.Errorf("dangling %q, want %q", dangling, want)
	}
}
