// Command ociimage builds the objlease container image for several
// platforms as an OCI image layout in a tar file, with no engine and no
// registry, the same bytes for the same inputs; converts one platform of
// it to the archive docker load reads (any engine version); and checks a
// built layout.
//
// The image, per platform, is one layer over nothing (as FROM scratch):
//
//	/usr/local/bin/objlease                the static CLI (the entrypoint)
//	/etc/ssl/certs/ca-certificates.crt     CA certificates, for TLS to a store
//	/etc/passwd, /etc/group                root and objlease (65532)
//	/home/objlease                         HOME and the working directory, owned by 65532
//	/tmp                                   mode 1777
//	/LICENSE
//	/usr/share/doc/objlease/sbom.spdx.json the image's SPDX 2.3 SBOM
//
// run as user 65532:65532. Every entry of the layer is in name order,
// with the commit's time (SOURCE_DATE_EPOCH) and a fixed owner; the image
// config's times are the same. The layout's index.json names one image
// index (the multi-platform image, tagged with the version), which lists
// one manifest per platform.
//
// Usage:
//
//	ociimage build -version V -revision C -certs FILE -license FILE -out OUT.oci.tar \
//	    -sbom-dir DIR linux/amd64=BINARY [linux/arm64=BINARY ...]
//	ociimage docker-archive IN.oci.tar PLATFORM TAG OUT.tar
//	ociimage check IN.oci.tar SBOM-DIR
//	ociimage contains A.oci.tar B.oci.tar
//
// contains fails unless every platform's image of B is in A, the same
// manifest (so the same config and layer): how a build of some platforms
// is compared with a build of all.
//
// build also writes each platform's SBOM (the file the image holds) as
// DIR/objlease_V_image_OS_ARCH.spdx.json.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/objlease/objlease/scripts/internal/spdx"
)

const (
	imageName     = "objlease/objlease"
	binaryPath    = "usr/local/bin/objlease"
	sbomPath      = "usr/share/doc/objlease/sbom.spdx.json"
	certsPath     = "etc/ssl/certs/ca-certificates.crt"
	uid           = 65532
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "docker-archive":
		if len(os.Args) != 6 {
			usage()
		}
		err = dockerArchive(os.Args[2], os.Args[3], os.Args[4], os.Args[5])
	case "contains":
		if len(os.Args) != 4 {
			usage()
		}
		err = contains(os.Args[2], os.Args[3])
	case "check":
		if len(os.Args) != 4 {
			usage()
		}
		err = check(os.Args[2], os.Args[3])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: ociimage build -version V -revision C -certs FILE -license FILE -out OUT.oci.tar -sbom-dir DIR OS/ARCH=BINARY...
       ociimage docker-archive IN.oci.tar OS/ARCH TAG OUT.tar
       ociimage check IN.oci.tar SBOM-DIR
       ociimage contains A.oci.tar B.oci.tar`)
	os.Exit(2)
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        descriptor        `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type imageConfig struct {
	Created      string    `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       runConfig `json:"config"`
	RootFS       rootFS    `json:"rootfs"`
	History      []history `json:"history"`
}

type runConfig struct {
	User       string            `json:"User"`
	Env        []string          `json:"Env"`
	Entrypoint []string          `json:"Entrypoint"`
	WorkingDir string            `json:"WorkingDir"`
	Labels     map[string]string `json:"Labels"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// blobs are a layout's content-addressed files, by digest.
type blobs map[string][]byte

func (b blobs) add(mediaType string, data []byte) descriptor {
	sum := sha256.Sum256(data)
	d := "sha256:" + hex.EncodeToString(sum[:])
	b[d] = data
	return descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %v", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

type node struct {
	name     string // without a leading slash; a directory's ends in '/'
	data     []byte
	mode     int64
	uid, gid int
}

// layer is the gzip'd tar of the nodes, in name order, and the digest of
// the tar (the diff ID).
func layer(nodes []node, mtime time.Time) (gz []byte, diffID string, err error) {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, n := range nodes {
		h := &tar.Header{Name: n.name, Mode: n.mode, Uid: n.uid, Gid: n.gid, ModTime: mtime, Format: tar.FormatPAX}
		if strings.HasSuffix(n.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(n.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(n.data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw.Bytes())
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, "", err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return out.Bytes(), "sha256:" + hex.EncodeToString(sum[:]), nil
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	version := fs.String("version", "", "the release version (the image's tag)")
	revision := fs.String("revision", "", "the commit")
	certsFile := fs.String("certs", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates bundle")
	certsComment := fs.String("certs-comment", "", "where the CA certificates come from, for the SBOM")
	licenseFile := fs.String("license", "LICENSE", "the LICENSE file")
	out := fs.String("out", "", "the OCI layout tar to write")
	sbomDir := fs.String("sbom-dir", "", "where to write each platform's SBOM")
	fs.Parse(args)
	if *version == "" || *out == "" || *sbomDir == "" || fs.NArg() == 0 {
		return errors.New("build needs -version, -out, -sbom-dir and at least one OS/ARCH=BINARY")
	}
	mtime, err := sourceDate()
	if err != nil {
		return err
	}
	created := mtime.Format(time.RFC3339)
	certs, err := os.ReadFile(*certsFile)
	if err != nil {
		return fmt.Errorf("the CA certificates: %w (apt-get install ca-certificates): the image could not reach a store over TLS", err)
	}
	license, err := os.ReadFile(*licenseFile)
	if err != nil {
		return err
	}
	passwd := []byte("root:x:0:0:root:/root:/sbin/nologin\nobjlease:x:65532:65532:objlease:/home/objlease:/sbin/nologin\n")
	group := []byte("root:x:0:\nobjlease:x:65532:\n")

	b := blobs{}
	var manifests []descriptor
	for _, arg := range fs.Args() {
		plat, binFile, ok := strings.Cut(arg, "=")
		goos, goarch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 {
			return fmt.Errorf("%q: want OS/ARCH=BINARY", arg)
		}
		bin, err := os.ReadFile(binFile)
		if err != nil {
			return err
		}
		info, err := spdx.ReadBinary(binFile)
		if err != nil {
			return err
		}
		files := map[string][]byte{
			binaryPath: bin, certsPath: certs, "etc/passwd": passwd, "etc/group": group, "LICENSE": license,
		}
		doc := spdx.New(info, spdx.Options{
			Name:      fmt.Sprintf("objlease_%s_image_%s_%s", *version, goos, goarch),
			Namespace: "https://github.com/objlease/objlease/releases/" + *version + "/spdx",
			Version:   *version,
			Revision:  *revision,
			Created:   mtime,
			Image: &spdx.Image{
				Name: imageName, Platform: plat, BinaryPath: binaryPath, Files: files,
				CertsPath: certsPath, CertsComment: *certsComment,
			},
		})
		sbom := spdx.Marshal(doc)
		if err := os.WriteFile(filepath.Join(*sbomDir, doc.Name+".spdx.json"), sbom, 0o644); err != nil {
			return err
		}
		nodes := []node{
			{name: "etc/", mode: 0o755}, {name: "etc/ssl/", mode: 0o755}, {name: "etc/ssl/certs/", mode: 0o755},
			{name: "home/", mode: 0o755}, {name: "home/objlease/", mode: 0o755, uid: uid, gid: uid},
			{name: "tmp/", mode: 0o1777},
			{name: "usr/", mode: 0o755}, {name: "usr/local/", mode: 0o755}, {name: "usr/local/bin/", mode: 0o755},
			{name: "usr/share/", mode: 0o755}, {name: "usr/share/doc/", mode: 0o755}, {name: "usr/share/doc/objlease/", mode: 0o755},
			{name: sbomPath, data: sbom, mode: 0o644},
		}
		for p, data := range files {
			mode := int64(0o644)
			if p == binaryPath {
				mode = 0o755
			}
			nodes = append(nodes, node{name: p, data: data, mode: mode})
		}
		gz, diffID, err := layer(nodes, mtime)
		if err != nil {
			return err
		}
		layerDesc := b.add(mediaLayer, gz)
		cfg := imageConfig{
			Created: created, Architecture: goarch, OS: goos,
			Config: runConfig{
				User:       "65532:65532",
				Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/objlease"},
				Entrypoint: []string{"/" + binaryPath},
				WorkingDir: "/home/objlease",
				Labels: map[string]string{
					"org.opencontainers.image.title":    "objlease",
					"org.opencontainers.image.version":  *version,
					"org.opencontainers.image.revision": *revision,
					"org.opencontainers.image.created":  created,
					"org.opencontainers.image.source":   "https://github.com/objlease/objlease",
					"org.opencontainers.image.licenses": "Apache-2.0",
				},
			},
			RootFS:  rootFS{Type: "layers", DiffIDs: []string{diffID}},
			History: []history{{Created: created, CreatedBy: "scripts/release.sh: the objlease binary, CA certificates, users, LICENSE, SBOM"}},
		}
		cfgDesc := b.add(mediaConfig, mustJSON(cfg))
		m := b.add(mediaManifest, mustJSON(manifest{SchemaVersion: 2, MediaType: mediaManifest, Config: cfgDesc, Layers: []descriptor{layerDesc}}))
		m.Platform = &platform{Architecture: goarch, OS: goos}
		manifests = append(manifests, m)
	}
	idx := b.add(mediaIndex, mustJSON(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: manifests}))
	idx.Annotations = map[string]string{
		"org.opencontainers.image.ref.name": *version,
		"io.containerd.image.name":          "docker.io/" + imageName + ":" + *version,
	}
	top := mustJSON(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{idx}})
	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": top,
	}
	for d, data := range b {
		files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] = data
	}
	if err := writeTar(*out, files, mtime); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "ociimage: %s: %s:%s, image index %s\n", *out, imageName, *version, idx.Digest)
	for _, m := range manifests {
		fmt.Fprintf(os.Stderr, "ociimage:   %s/%s manifest %s\n", m.Platform.OS, m.Platform.Architecture, m.Digest)
	}
	return nil
}

// writeTar writes files (and their directories) to a tar at path, in name
// order, with mtime and owner root.
func writeTar(path string, files map[string][]byte, mtime time.Time) error {
	names := map[string]bool{}
	for n := range files {
		names[n] = true
		for d := filepath.Dir(n); d != "."; d = filepath.Dir(d) {
			names[d+"/"] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, n := range sorted {
		h := &tar.Header{Name: n, Mode: 0o644, ModTime: mtime, Typeflag: tar.TypeReg, Size: int64(len(files[n])), Format: tar.FormatPAX}
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(files[n]); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// dockerArchive writes one platform's image of the layout as the archive
// docker load reads on every engine version (manifest.json, the config
// and the layer), tagged tag. The engine's image ID is the config's
// digest, the same as in the layout.
func dockerArchive(in, plat, tag, out string) error {
	l, err := openLayout(in)
	if err != nil {
		return err
	}
	ims, err := l.images()
	if err != nil {
		return err
	}
	for _, im := range ims {
		if im.platform() != plat {
			continue
		}
		cfgName := "blobs/sha256/" + strings.TrimPrefix(im.cfgDesc.Digest, "sha256:")
		lyrName := "blobs/sha256/" + strings.TrimPrefix(im.lyrDesc.Digest, "sha256:")
		m := []map[string]any{{"Config": cfgName, "RepoTags": []string{tag}, "Layers": []string{lyrName}}}
		mtime, err := sourceDate()
		if err != nil {
			return err
		}
		return writeTar(out, map[string][]byte{"manifest.json": mustJSON(m), cfgName: im.config, lyrName: im.layer}, mtime)
	}
	return fmt.Errorf("%s has no image for %s", in, plat)
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// check verifies every platform's image of the layout: digests and
// sizes, the config's platform and run settings, the diff ID, the
// binary's ELF machine, and the SBOM it holds: the same bytes as in
// sbomDir, and the modules go version -m prints for the binary.
func check(in, sbomDir string) error {
	l, err := openLayout(in)
	if err != nil {
		return err
	}
	ims, err := l.images()
	if err != nil {
		return err
	}
	if len(ims) == 0 {
		return fmt.Errorf("%s: no image", in)
	}
	version := l.index.Annotations["org.opencontainers.image.ref.name"]
	tmp, err := os.MkdirTemp("", "ociimage-check")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, im := range ims {
		p := im.platform()
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%s, %s image: %s", in, p, fmt.Sprintf(format, args...))
		}
		c := im.cfg
		if c.OS != im.manifest.Platform.OS || c.Architecture != im.manifest.Platform.Architecture {
			return fail("the config says %s/%s", c.OS, c.Architecture)
		}
		if c.Config.User != "65532:65532" || len(c.Config.Entrypoint) != 1 || c.Config.Entrypoint[0] != "/"+binaryPath {
			return fail("user %q, entrypoint %q", c.Config.User, c.Config.Entrypoint)
		}
		zr, err := gzip.NewReader(bytes.NewReader(im.layer))
		if err != nil {
			return fail("layer: %v", err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			return fail("layer: %v", err)
		}
		sum := sha256.Sum256(raw)
		if len(c.RootFS.DiffIDs) != 1 || c.RootFS.DiffIDs[0] != "sha256:"+hex.EncodeToString(sum[:]) {
			return fail("the config's diff ID is not the layer's")
		}
		files, err := readTar(bytes.NewReader(raw))
		if err != nil {
			return fail("layer: %v", err)
		}
		bin, ok := files[binaryPath]
		if !ok {
			return fail("no /%s", binaryPath)
		}
		ef, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			return fail("/%s is not an ELF binary: %v", binaryPath, err)
		}
		if want, ok := elfMachine[c.Architecture]; !ok || ef.Machine != want || ef.Class != elf.ELFCLASS64 {
			return fail("/%s is an ELF binary for %s, not %s", binaryPath, ef.Machine, c.Architecture)
		}
		sbom := files[sbomPath]
		name := fmt.Sprintf("objlease_%s_image_%s_%s.spdx.json", version, c.OS, c.Architecture)
		beside, err := os.ReadFile(filepath.Join(sbomDir, name))
		if err != nil {
			return fail("%v", err)
		}
		if !bytes.Equal(sbom, beside) {
			return fail("/%s is not %s", sbomPath, name)
		}
		var doc spdx.Document
		if err := json.Unmarshal(sbom, &doc); err != nil {
			return fail("/%s: %v", sbomPath, err)
		}
		binFile := filepath.Join(tmp, strings.ReplaceAll(p, "/", "_"))
		if err := os.WriteFile(binFile, bin, 0o644); err != nil {
			return err
		}
		want, err := spdx.GoVersionModules(binFile)
		if err != nil {
			return fail("%v", err)
		}
		if len(want) == 0 {
			return fail("go version -m prints no modules for /%s", binaryPath)
		}
		if d := spdx.Diff(spdx.Modules(&doc), want); d != "" {
			return fail("the SBOM does not list the modules of go version -m:\n%s", d)
		}
		fmt.Fprintf(os.Stderr, "ociimage: %s ok: %s ELF %s, %d modules as go version -m, manifest %s, %d bytes compressed\n",
			p, c.Architecture, ef.Machine, len(want), im.manifest.Digest, im.lyrDesc.Size+im.cfgDesc.Size+im.manifest.Size)
	}
	return nil
}

// contains fails unless every platform's image of layout b is in layout
// a with the same manifest digest, and the blobs it names (manifest,
// config, layer) are the same bytes in both.
func contains(a, b string) error {
	la, err := openLayout(a)
	if err != nil {
		return err
	}
	lb, err := openLayout(b)
	if err != nil {
		return err
	}
	ia, err := la.images()
	if err != nil {
		return fmt.Errorf("%s: %v", a, err)
	}
	ib, err := lb.images()
	if err != nil {
		return fmt.Errorf("%s: %v", b, err)
	}
	byPlatform := map[string]image{}
	for _, im := range ia {
		byPlatform[im.platform()] = im
	}
	for _, im := range ib {
		other, ok := byPlatform[im.platform()]
		if !ok {
			return fmt.Errorf("%s has no %s image; %s has", a, im.platform(), b)
		}
		if other.manifest.Digest != im.manifest.Digest {
			return fmt.Errorf("%s image: manifest %s in %s, %s in %s", im.platform(), other.manifest.Digest, a, im.manifest.Digest, b)
		}
		fmt.Fprintf(os.Stderr, "ociimage: %s image: manifest %s in both\n", im.platform(), im.manifest.Digest)
	}
	return nil
}
