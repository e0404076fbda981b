package main

// Reading what build wrote: a tar's files, and the OCI image layout in it.

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// readTar reads a tar's regular files by name.
func readTar(r io.Reader) (map[string][]byte, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[h.Name] = data
	}
}

// layout is a read OCI image layout.
type layout struct {
	files map[string][]byte
	index descriptor // the image index index.json names
}

func openLayout(path string) (*layout, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files, err := readTar(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	l := &layout{files: files}
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		return nil, fmt.Errorf("%s: no oci-layout file of version 1.0.0", path)
	}
	var top index
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		return nil, fmt.Errorf("%s: index.json: %v", path, err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaIndex {
		return nil, fmt.Errorf("%s: index.json names %d descriptors, want one image index", path, len(top.Manifests))
	}
	l.index = top.Manifests[0]
	return l, nil
}

// blob reads the blob d names and checks its digest and size.
func (l *layout) blob(d descriptor) ([]byte, error) {
	data, ok := l.files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok {
		return nil, fmt.Errorf("no blob %s", d.Digest)
	}
	sum := sha256.Sum256(data)
	if "sha256:"+hex.EncodeToString(sum[:]) != d.Digest || int64(len(data)) != d.Size {
		return nil, fmt.Errorf("blob %s: its content has another digest or size", d.Digest)
	}
	return data, nil
}

// image is one platform's image of a layout.
type image struct {
	manifest descriptor
	config   []byte
	cfg      imageConfig
	layer    []byte // gzip'd
	cfgDesc  descriptor
	lyrDesc  descriptor
}

func (l *layout) images() ([]image, error) {
	data, err := l.blob(l.index)
	if err != nil {
		return nil, err
	}
	var idx index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, err
	}
	var out []image
	for _, md := range idx.Manifests {
		if md.Platform == nil {
			return nil, fmt.Errorf("manifest %s has no platform", md.Digest)
		}
		data, err := l.blob(md)
		if err != nil {
			return nil, err
		}
		var m manifest
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, err
		}
		if len(m.Layers) != 1 {
			return nil, fmt.Errorf("manifest %s has %d layers, want 1", md.Digest, len(m.Layers))
		}
		im := image{manifest: md, cfgDesc: m.Config, lyrDesc: m.Layers[0]}
		if im.config, err = l.blob(m.Config); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(im.config, &im.cfg); err != nil {
			return nil, err
		}
		if im.layer, err = l.blob(m.Layers[0]); err != nil {
			return nil, err
		}
		out = append(out, im)
	}
	return out, nil
}

func (im image) platform() string {
	return im.manifest.Platform.OS + "/" + im.manifest.Platform.Architecture
}
