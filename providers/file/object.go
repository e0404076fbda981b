package file

// This file holds the object on disk: its sidecar, its data file, the forms
// earlier releases and other tools left, and how a reader recognises the
// current version or settles a write that was interrupted.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/objlease/objlease/providers/driver"
)

// sidecar is the content of an object's attributes file.
type sidecar struct {
	Version  string            `json:"version"`
	Size     int64             `json:"size"`
	SHA256   string            `json:"sha256"`
	Modified time.Time         `json:"modified"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Inode and MtimeNs identify the data file the write renamed into
	// place, so that a reader can recognise it without hashing it.
	Inode uint64 `json:"inode,omitempty"`
	// Pending names the file in the object's directory that holds this
	// version's data until it is renamed into place.
	Pending string `json:"pending,omitempty"`
	MtimeNs int64  `json:"mtime_ns,omitempty"`
}

// readSidecar returns the sidecar at p, or nil if there is none or it
// cannot be decoded.
func readSidecar(p string) (*sidecar, error) {
	f, err := openFile(p, os.O_RDONLY, 0)
	if absent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSidecar+1))
	if err != nil {
		if absent(err) {
			return nil, nil
		}
		return nil, err
	}
	var sc sidecar
	if len(b) > maxSidecar || json.Unmarshal(b, &sc) != nil || sc.Version == "" || sc.Size < 0 || len(sc.SHA256) != 2*sha256.Size {
		// Damaged by something else (the store only renames whole sidecars
		// into place): the data file stands alone, as a plain file.
		return nil, nil
	}
	return &sc, nil
}

// dataFile is an open file that may hold an object's bytes.
type dataFile struct {
	f  *os.File
	fi os.FileInfo
}

// openData opens the regular file at p, or returns nil if there is none.
func openData(p string) (*dataFile, error) {
	f, err := openFile(p, os.O_RDONLY, 0)
	if absent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &dataFile{f: f, fi: fi}, nil
}

func (d *dataFile) close() {
	if d != nil {
		d.f.Close()
	}
}

func (d *dataFile) hash() (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(d.f, 0, d.fi.Size())); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// matches reports whether d holds the data sc describes: the very file
// the write renamed into place, or a copy with the same bytes.
func (d *dataFile) matches(sc *sidecar) (bool, error) {
	if d == nil || d.fi.Size() != sc.Size {
		return false, nil
	}
	if ino, mt := identity(d.f, d.fi); sc.Inode != 0 && ino == sc.Inode && mt == sc.MtimeNs {
		return true, nil
	}
	sum, err := d.hash()
	return sum == sc.SHA256, err
}

// object is what the store found at a key.
type object struct {
	attrs driver.Attrs
	file  *dataFile // nil if the object does not exist
	off   int64     // where the bytes start in file (old format)
}

func (o *object) exists() bool { return o.file != nil }

func (o *object) close() { o.file.close() }

// data reads the object's bytes.
func (o *object) data() ([]byte, error) {
	b := make([]byte, o.attrs.Size)
	_, err := o.file.f.ReadAt(b, o.off)
	return b, err
}

func fromSidecar(key string, sc *sidecar, d *dataFile) *object {
	return &object{file: d, attrs: driver.Attrs{
		Key: key, Version: sc.Version, Size: sc.Size, Metadata: sc.Metadata, LastModified: sc.Modified,
	}}
}

// foreign describes a file with no sidecar that matches it.
func foreign(key string, d *dataFile) (*object, error) {
	if o := oldFormat(key, d); o != nil {
		return o, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(d.f, 0, d.fi.Size())); err != nil {
		return nil, err
	}
	fmt.Fprintf(h, "\x00%d", d.fi.ModTime().UnixNano())
	return &object{file: d, attrs: driver.Attrs{
		Key: key, Version: "f" + hex.EncodeToString(h.Sum(nil))[:32], Size: d.fi.Size(), LastModified: d.fi.ModTime(),
	}}, nil
}

// oldHeader is the JSON line after oldMagic in objects of earlier releases.
type oldHeader struct {
	Version  string            `json:"version"`
	Size     int64             `json:"size"`
	Modified time.Time         `json:"modified"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// oldFormat decodes an object written by an earlier release, or returns nil
// if d is not one.
func oldFormat(key string, d *dataFile) *object {
	head := make([]byte, min(d.fi.Size(), int64(len(oldMagic))+maxSidecar))
	n, _ := d.f.ReadAt(head, 0)
	rest, ok := bytes.CutPrefix(head[:n], []byte(oldMagic))
	if !ok {
		return nil
	}
	line, _, ok := bytes.Cut(rest, []byte("\n"))
	var h oldHeader
	if !ok || json.Unmarshal(line, &h) != nil || h.Version == "" {
		return nil
	}
	off := int64(len(oldMagic) + len(line) + 1)
	if d.fi.Size()-off != h.Size {
		return nil
	}
	return &object{file: d, off: off, attrs: driver.Attrs{
		Key: key, Version: h.Version, Size: h.Size, Metadata: h.Metadata, LastModified: h.Modified,
	}}
}

// look reads the object at f without the lock. settled is false when what
// it saw may be a write in progress, or one interrupted by a crash: then
// the caller must look again under the lock.
func look(f paths) (o *object, settled bool, err error) {
	sc, err := readSidecar(f.attrs)
	if err != nil {
		return nil, false, err
	}
	d, err := openData(f.data)
	if err != nil {
		return nil, false, err
	}
	switch {
	case sc != nil:
		ok, err := d.matches(sc)
		if err != nil || !ok {
			d.close()
			return nil, false, err
		}
		return fromSidecar(f.key, sc, d), true, nil
	case d == nil:
		return &object{attrs: driver.Attrs{Key: f.key}}, true, nil
	}
	// Data without a sidecar. Writers commit the sidecar before the data
	// appears and remove it only after the data is gone, so if there is
	// still none the file is not one of ours in the middle of a write.
	if sc2, err := readSidecar(f.attrs); err != nil || sc2 != nil {
		d.close()
		return nil, false, err
	}
	o, err = foreign(f.key, d)
	if err != nil {
		d.close()
		return nil, false, err
	}
	return o, true, nil
}

// settle reads the object at f while holding its lock, finishing a write
// that a crash interrupted after its commit point.
func settle(f paths) (*object, error) {
	sc, err := readSidecar(f.attrs)
	if err != nil {
		return nil, err
	}
	d, err := openData(f.data)
	if err != nil {
		return nil, err
	}
	if sc != nil {
		ok, err := d.matches(sc)
		if err != nil {
			d.close()
			return nil, err
		}
		if ok {
			return fromSidecar(f.key, sc, d), nil
		}
		pending := f.pending
		if p := sc.Pending; strings.HasPrefix(p, reserved+"-pending") && !strings.ContainsRune(p, filepath.Separator) {
			pending = join(f.dir, p)
		}
		pd, err := openData(pending)
		if err != nil {
			d.close()
			return nil, err
		}
		ok, err = pd.matches(sc)
		if err != nil || !ok {
			pd.close()
		}
		if err != nil {
			d.close()
			return nil, err
		}
		if ok {
			// Committed but not yet in place: roll forward.
			d.close()
			if err := os.Rename(pending, f.data); err != nil {
				pd.close()
				return nil, err
			}
			if err := syncDir(f.dir); err != nil {
				pd.close()
				return nil, err
			}
			return fromSidecar(f.key, sc, pd), nil
		}
		// Neither file is the one the sidecar describes: the data was
		// changed or removed by something else. Drop the stale sidecar so
		// that later reads need no lock.
		if err := os.Remove(f.attrs); err != nil && !absent(err) {
			d.close()
			return nil, err
		}
	}
	if d == nil {
		return &object{attrs: driver.Attrs{Key: f.key}}, nil
	}
	// Written by something else since (or never ours): a plain file.
	o, err := foreign(f.key, d)
	if err != nil {
		d.close()
	}
	return o, err
}
