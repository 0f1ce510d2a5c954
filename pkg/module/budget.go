package module

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"

	"github.com/oprov/oprov/pkg/oci"
)

// The walk-wide limits, named so that the program that set them can say how to raise them (an
// oci.LimitError carries one).
const (
	SettingMaxModuleBytes oci.Setting = "module walk's byte budget"
	SettingMaxModuleFiles oci.Setting = "module walk's file budget"
	SettingMaxModuleRatio oci.Setting = "module archives' expansion limit"
	SettingMaxModuleCalls oci.Setting = "module walk's call limit"
)

// budget is what a walk may hold on disk at once, in bytes and regular files, across every
// package: what is written is charged before or as it is written, what is removed is credited.
type budget struct {
	maxBytes int64
	maxFiles int
	bytes    int64
	files    int
	written  usage // every charge of the walk, credits not deducted: what it wrote in all
}

// usage is what one directory of the walk holds.
type usage struct {
	bytes int64
	files int
}

// room is how many more bytes may be written.
func (b *budget) room() int64 { return b.maxBytes - b.bytes }

// charge takes n bytes and files from the budget, or refuses them naming the budget; what says
// what was being written.
func (b *budget) charge(what string, u usage) error {
	if b.bytes+u.bytes > b.maxBytes {
		return &oci.LimitError{
			What:    fmt.Sprintf("%s takes the module files of the walk past %s", what, oci.FormatSize(b.maxBytes)),
			Limit:   "the " + string(SettingMaxModuleBytes) + " of " + oci.FormatSize(b.maxBytes),
			Setting: SettingMaxModuleBytes,
		}
	}
	if b.files+u.files > b.maxFiles {
		return &oci.LimitError{
			What:    fmt.Sprintf("%s takes the module files of the walk past %d files", what, b.maxFiles),
			Limit:   fmt.Sprintf("the %s of %d files", SettingMaxModuleFiles, b.maxFiles),
			Setting: SettingMaxModuleFiles,
		}
	}
	b.bytes += u.bytes
	b.files += u.files
	b.written.bytes += u.bytes
	b.written.files += u.files
	return nil
}

// credit gives back what a removed directory held.
func (b *budget) credit(u usage) {
	b.bytes -= u.bytes
	b.files -= u.files
}

// zipDeclared is what a zip says it unpacks to: the sum of its entries' sizes (archive/zip
// refuses an entry that gives more than its header says) and its regular files. An entry that
// would expand more than maxRatio times (and past 1 MiB) is refused.
func zipDeclared(data []byte, maxRatio int64) (usage, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return usage{}, fmt.Errorf("not a valid zip: %w", err)
	}
	var u usage
	for _, f := range zr.File {
		if f.Mode().IsDir() {
			continue
		}
		u.files++
		if f.UncompressedSize64 > 1<<62 {
			return usage{}, fmt.Errorf("%w: zip entry %q declares %d bytes", errUnsafeArchive, f.Name, f.UncompressedSize64)
		}
		u.bytes += int64(f.UncompressedSize64)
		if f.UncompressedSize64 > 1<<20 && (f.CompressedSize64 == 0 || f.UncompressedSize64/f.CompressedSize64 > uint64(maxRatio)) {
			return usage{}, ratioError(fmt.Sprintf("zip entry %q", f.Name), int64(f.UncompressedSize64), int64(f.CompressedSize64), maxRatio)
		}
	}
	return u, nil
}

func ratioError(what string, out, in, maxRatio int64) error {
	ratio := "without end"
	if in > 0 {
		ratio = fmt.Sprintf("%dx", out/in)
	}
	return &oci.LimitError{
		What:    fmt.Sprintf("%s expands %s (%s from %s: a bomb?)", what, ratio, oci.FormatSize(out), oci.FormatSize(in)),
		Limit:   fmt.Sprintf("the %s of %dx", SettingMaxModuleRatio, maxRatio),
		Setting: SettingMaxModuleRatio,
	}
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// ratioReader refuses a decompressed stream once it has given more than maxRatio times the
// compressed bytes read so far (and past 1 MiB): a gzip bomb is stopped as it expands, whatever
// budget is left.
type ratioReader struct {
	r        io.Reader
	in       *counter
	out      int64
	maxRatio int64
}

func (r *ratioReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.out += int64(n)
	if r.out > 1<<20 && r.out > r.maxRatio*r.in.n {
		return n, ratioError("the gzip stream", r.out, r.in.n, r.maxRatio)
	}
	return n, err
}
