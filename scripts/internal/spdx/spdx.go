// Package spdx writes the SPDX 2.3 (JSON) software bills of materials of
// the release: for a Go binary, the binary itself, the Go standard
// library it was built with and every module its build information
// (what go version -m prints) names, with the module's version and go.sum
// hash; for an image, also the files it holds. The same inputs give the
// same bytes: no clock, no random identifiers.
package spdx

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"sort"
	"strings"
	"time"
	"unicode"
)

// Document is an SPDX 2.3 document, the fields this package writes.
type Document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      CreationInfo   `json:"creationInfo"`
	Packages          []Package      `json:"packages"`
	Files             []File         `json:"files,omitempty"`
	Relationships     []Relationship `json:"relationships"`
}

type CreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type Package struct {
	SPDXID                string        `json:"SPDXID"`
	Name                  string        `json:"name"`
	VersionInfo           string        `json:"versionInfo,omitempty"`
	Supplier              string        `json:"supplier,omitempty"`
	DownloadLocation      string        `json:"downloadLocation"`
	FilesAnalyzed         bool          `json:"filesAnalyzed"`
	Checksums             []Checksum    `json:"checksums,omitempty"`
	LicenseConcluded      string        `json:"licenseConcluded"`
	LicenseDeclared       string        `json:"licenseDeclared"`
	CopyrightText         string        `json:"copyrightText"`
	PrimaryPackagePurpose string        `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs          []ExternalRef `json:"externalRefs,omitempty"`
	Comment               string        `json:"comment,omitempty"`
}

type File struct {
	SPDXID           string     `json:"SPDXID"`
	FileName         string     `json:"fileName"`
	Checksums        []Checksum `json:"checksums"`
	LicenseConcluded string     `json:"licenseConcluded"`
	CopyrightText    string     `json:"copyrightText"`
	FileTypes        []string   `json:"fileTypes,omitempty"`
	Comment          string     `json:"comment,omitempty"`
}

type Checksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type ExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type Relationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

// Module is a module of a binary's build information, as go version -m
// prints it (after a replacement, the module used).
type Module struct{ Path, Version, Sum string }

// Binary is what a Go binary's build information says.
type Binary struct {
	GoVersion string
	Path      string // the main package
	Main      string // the main module
	Settings  []debug.BuildSetting
	Modules   []Module // sorted by path
	SHA256    string
}

// ReadBinary reads the build information of the Go binary at path (for
// any GOOS and GOARCH).
func ReadBinary(path string) (*Binary, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: reading its Go build information: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	b := &Binary{GoVersion: bi.GoVersion, Path: bi.Path, Main: bi.Main.Path, Settings: bi.Settings, SHA256: hex.EncodeToString(sum[:])}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		b.Modules = append(b.Modules, Module{d.Path, d.Version, d.Sum})
	}
	sort.Slice(b.Modules, func(i, j int) bool { return b.Modules[i].Path < b.Modules[j].Path })
	return b, nil
}

// GoVersionModules runs go version -m on the binary at path and returns
// the modules it prints (the replacement's line where a module was
// replaced), sorted by path: the list an SBOM must match, read by the go
// command rather than by this package.
func GoVersionModules(path string) ([]Module, error) {
	out, err := exec.Command("go", "version", "-m", path).Output()
	if err != nil {
		return nil, fmt.Errorf("go version -m %s: %w", path, err)
	}
	var mods []Module
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimSpace(line), "\t")
		switch {
		case len(f) >= 3 && f[0] == "dep":
			m := Module{Path: f[1], Version: f[2]}
			if len(f) >= 4 {
				m.Sum = f[3]
			}
			mods = append(mods, m)
		case len(f) >= 3 && f[0] == "=>" && len(mods) > 0:
			m := Module{Path: f[1], Version: f[2]}
			if len(f) >= 4 {
				m.Sum = f[3]
			}
			mods[len(mods)-1] = m
		}
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	return mods, nil
}

// Modules returns the Go modules an SBOM lists: its packages with a
// pkg:golang purl, but the standard library and the main module.
func Modules(doc *Document) []Module {
	var mods []Module
	for _, p := range doc.Packages {
		if p.PrimaryPackagePurpose != "LIBRARY" || p.Name == "stdlib" {
			continue
		}
		m := Module{Path: p.Name, Version: p.VersionInfo}
		if s, ok := strings.CutPrefix(p.Comment, "go.sum: "); ok {
			m.Sum = s
		}
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	return mods
}

// Options name what the document describes.
type Options struct {
	Name      string    // the document's name: the file described, e.g. the archive's
	Namespace string    // a URI prefix; the document's is it plus the name and a hash of the content
	Version   string    // the release version, the main module's
	Revision  string    // the commit
	Created   time.Time // the commit's time
	Image     *Image    // for an image's SBOM
}

// Image describes a container image: its name and platform, and the files
// it holds (the binary among them, at BinaryPath).
type Image struct {
	Name, Platform string
	BinaryPath     string
	Files          map[string][]byte // path in the image -> content
	CertsComment   string            // where the CA certificates come from
	CertsPath      string
}

const tool = "Tool: objlease-release-sbom"

// New describes bin (and, with opts.Image, the image holding it).
func New(bin *Binary, opts Options) *Document {
	doc := &Document{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        opts.Name,
		CreationInfo: CreationInfo{
			Created:  opts.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Organization: objlease", tool},
		},
	}
	var settings []string
	for _, s := range bin.Settings {
		settings = append(settings, s.Key+"="+s.Value)
	}
	binID := "SPDXRef-Package-objlease"
	doc.Packages = append(doc.Packages, Package{
		SPDXID:                binID,
		Name:                  bin.Path,
		VersionInfo:           opts.Version,
		Supplier:              "Organization: objlease",
		DownloadLocation:      "git+https://github.com/objlease/objlease@" + opts.Version,
		Checksums:             []Checksum{{"SHA256", bin.SHA256}},
		LicenseConcluded:      "Apache-2.0",
		LicenseDeclared:       "Apache-2.0",
		CopyrightText:         "NOASSERTION",
		PrimaryPackagePurpose: "APPLICATION",
		ExternalRefs:          []ExternalRef{purl(bin.Main, opts.Version)},
		Comment:               fmt.Sprintf("the objlease binary, commit %s, built by %s with %s", opts.Revision, bin.GoVersion, strings.Join(settings, " ")),
	})
	doc.Packages = append(doc.Packages, Package{
		SPDXID:                "SPDXRef-Package-stdlib",
		Name:                  "stdlib",
		VersionInfo:           bin.GoVersion,
		DownloadLocation:      "https://go.dev/dl/",
		LicenseConcluded:      "NOASSERTION",
		LicenseDeclared:       "BSD-3-Clause",
		CopyrightText:         "NOASSERTION",
		PrimaryPackagePurpose: "LIBRARY",
		ExternalRefs:          []ExternalRef{purl("stdlib", bin.GoVersion)},
		Comment:               "the Go standard library and runtime the binary links",
	})
	doc.Relationships = append(doc.Relationships, Relationship{binID, "DEPENDS_ON", "SPDXRef-Package-stdlib"})
	for i, m := range bin.Modules {
		id := fmt.Sprintf("SPDXRef-Package-module-%d-%s", i+1, idSafe(m.Path))
		p := Package{
			SPDXID:                id,
			Name:                  m.Path,
			VersionInfo:           m.Version,
			DownloadLocation:      "https://proxy.golang.org/" + escape(m.Path) + "/@v/" + escape(m.Version) + ".zip",
			LicenseConcluded:      "NOASSERTION",
			LicenseDeclared:       "NOASSERTION",
			CopyrightText:         "NOASSERTION",
			PrimaryPackagePurpose: "LIBRARY",
			ExternalRefs:          []ExternalRef{purl(m.Path, m.Version)},
		}
		if m.Sum != "" {
			p.Comment = "go.sum: " + m.Sum
			// The go.sum hash (h1:, SHA-256 of the module's file hashes),
			// in hexadecimal.
			if raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(m.Sum, "h1:")); err == nil && strings.HasPrefix(m.Sum, "h1:") && len(raw) == sha256.Size {
				p.Checksums = []Checksum{{"SHA256", hex.EncodeToString(raw)}}
			}
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, Relationship{binID, "DEPENDS_ON", id})
	}
	top := binID
	content := bin.SHA256
	if im := opts.Image; im != nil {
		top = "SPDXRef-Package-image"
		doc.Packages = append([]Package{{
			SPDXID:                top,
			Name:                  im.Name,
			VersionInfo:           opts.Version,
			Supplier:              "Organization: objlease",
			DownloadLocation:      "NOASSERTION",
			LicenseConcluded:      "NOASSERTION",
			LicenseDeclared:       "NOASSERTION",
			CopyrightText:         "NOASSERTION",
			PrimaryPackagePurpose: "CONTAINER",
			Comment:               "the objlease container image for " + im.Platform + " (this file is in it, at /usr/share/doc/objlease/sbom.spdx.json)",
		}}, doc.Packages...)
		doc.Relationships = append(doc.Relationships, Relationship{top, "CONTAINS", binID})
		paths := make([]string, 0, len(im.Files))
		for p := range im.Files {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		h := sha256.New()
		for i, p := range paths {
			data := im.Files[p]
			s1, s256 := sha1.Sum(data), sha256.Sum256(data)
			f := File{
				SPDXID:           fmt.Sprintf("SPDXRef-File-%d", i+1),
				FileName:         "./" + strings.TrimPrefix(p, "/"),
				Checksums:        []Checksum{{"SHA1", hex.EncodeToString(s1[:])}, {"SHA256", hex.EncodeToString(s256[:])}},
				LicenseConcluded: "NOASSERTION",
				CopyrightText:    "NOASSERTION",
			}
			switch p {
			case im.BinaryPath:
				f.FileTypes = []string{"BINARY"}
				doc.Relationships = append(doc.Relationships, Relationship{binID, "CONTAINS", f.SPDXID})
			case im.CertsPath:
				f.FileTypes = []string{"TEXT"}
				f.Comment = im.CertsComment
			default:
				f.FileTypes = []string{"TEXT"}
			}
			doc.Files = append(doc.Files, f)
			doc.Relationships = append(doc.Relationships, Relationship{top, "CONTAINS", f.SPDXID})
			fmt.Fprintf(h, "%s %x\n", p, s256)
		}
		content = hex.EncodeToString(h.Sum(nil))
	}
	doc.Relationships = append([]Relationship{{"SPDXRef-DOCUMENT", "DESCRIBES", top}}, doc.Relationships...)
	doc.DocumentNamespace = strings.TrimSuffix(opts.Namespace, "/") + "/" + opts.Name + "-" + content[:16]
	return doc
}

// Marshal is the document as indented JSON, with a final newline.
func Marshal(doc *Document) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		panic(err) // only strings and slices of them
	}
	return buf.Bytes()
}

func purl(path, version string) ExternalRef {
	return ExternalRef{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + version}
}

// escape is a module path or version as the module proxy protocol spells
// it: an upper-case letter as '!' and its lower case.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// idSafe keeps what an SPDX identifier may hold: letters, digits, '.', '-'.
func idSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '-') {
			return r
		}
		return '-'
	}, s)
}

// Diff compares the modules an SBOM lists with want (from
// GoVersionModules) and describes every difference; none is "".
func Diff(got, want []Module) string {
	g, w := map[Module]bool{}, map[Module]bool{}
	for _, m := range got {
		g[m] = true
	}
	for _, m := range want {
		w[m] = true
	}
	var out []string
	for _, m := range want {
		if !g[m] {
			out = append(out, fmt.Sprintf("missing from the SBOM: %s %s %s", m.Path, m.Version, m.Sum))
		}
	}
	for _, m := range got {
		if !w[m] {
			out = append(out, fmt.Sprintf("in the SBOM, not in go version -m: %s %s %s", m.Path, m.Version, m.Sum))
		}
	}
	if len(got) != len(want) && len(out) == 0 {
		out = append(out, fmt.Sprintf("the SBOM lists %d modules, go version -m %d", len(got), len(want)))
	}
	return strings.Join(out, "\n")
}
