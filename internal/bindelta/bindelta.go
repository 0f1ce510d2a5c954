// Package bindelta encodes a file as a delta against another, similar one (a compiled extension
// built for another CPython version), in a form a few lines of Python can apply with its
// standard library alone, in the manner of bsdiff: a stream of fixed-width operations (insert
// literal bytes, then copy a run of the base adding a difference to each byte), the literal
// bytes, and the differences (mostly zeros), each zlib-compressed. Encoding is deterministic.
//
// The format: Magic; the operations, zlib, after their length (uint32 little-endian); the
// literals, the same; the differences, zlib, to the end. An operation is three little-endian
// 32-bit numbers: literal bytes to insert, bytes to copy, and where the copy starts, as a signed
// distance from where the previous copy ended.
package bindelta

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Magic starts every delta.
const Magic = "OPRVDLT1"

const (
	minMatch  = 16 // the shortest run of the base worth an operation (12 bytes) instead of literals
	keyLen    = 8  // bytes hashed to find candidate runs
	tableBits = 22
	opSize    = 12 // an operation: insert uint32, copy uint32, offset int32 (from the previous copy's end), little-endian
)

// Encode gives the delta that rebuilds target from base.
func Encode(base, target []byte) ([]byte, error) {
	if len(base) >= 1<<31 || len(target) >= 1<<31 {
		return nil, errors.New("bindelta: files of 2 GiB or more are not encoded")
	}
	table := indexBase(base)
	var ops, lits, diff bytes.Buffer
	var op [opSize]byte
	emit := func(insert, copyLen, offset int) {
		binary.LittleEndian.PutUint32(op[0:], uint32(insert))
		binary.LittleEndian.PutUint32(op[4:], uint32(copyLen))
		binary.LittleEndian.PutUint32(op[8:], uint32(int32(offset)))
		ops.Write(op[:])
	}
	litStart, prevEnd, lastNewEnd := 0, 0, 0
	for i := 0; i+keyLen <= len(target); {
		best, bestPos := 0, 0
		// Where the base would continue if the files were only shifted: most runs resume there
		// after a few changed bytes (an address, an offset).
		if exp := prevEnd + (i - lastNewEnd); exp >= 0 && exp < len(base) {
			if l := matchLen(base[exp:], target[i:]); l >= minMatch {
				best, bestPos = l, exp
			}
		}
		if best == 0 {
			if c := table[hash(target[i:])]; c >= 0 {
				if l := matchLen(base[c:], target[i:]); l >= minMatch {
					best, bestPos = l, int(c)
				}
			}
		}
		if best == 0 {
			i++
			continue
		}
		for i > litStart && bestPos > 0 && base[bestPos-1] == target[i-1] {
			i, bestPos, best = i-1, bestPos-1, best+1
		}
		// Past the exact run, go on while more bytes match than not (bsdiff's rule): the bytes
		// that differ (an address, an offset) cost only their difference, mostly zeros, and
		// the same few values where code moved by the same distance.
		best += extendMatch(base[bestPos+best:], target[i+best:])
		lits.Write(target[litStart:i])
		for k := 0; k < best; k++ {
			diff.WriteByte(target[i+k] - base[bestPos+k])
		}
		emit(i-litStart, best, bestPos-prevEnd)
		prevEnd = bestPos + best
		i += best
		litStart, lastNewEnd = i, i
	}
	lits.Write(target[litStart:])
	emit(len(target)-litStart, 0, 0)

	return pack(ops.Bytes(), lits.Bytes(), diff.Bytes())
}

// indexBase maps the hash of every keyLen bytes of base to where they first occur (-1: nowhere).
func indexBase(base []byte) []int32 {
	table := make([]int32, 1<<tableBits)
	for i := range table {
		table[i] = -1
	}
	for p := 0; p+keyLen <= len(base); p++ {
		if h := hash(base[p:]); table[h] < 0 {
			table[h] = int32(p)
		}
	}
	return table
}

// extendMatch is how far a match goes on past its exact run, where base and target continue:
// while more bytes match than not (bsdiff's rule).
func extendMatch(base, target []byte) int {
	score, bestScore, extra := 0, 0, 0
	for k := 0; k < len(base) && k < len(target); k++ {
		if base[k] == target[k] {
			score++
		} else {
			score--
		}
		if score > bestScore {
			bestScore, extra = score, k+1
		}
		if score < bestScore-64 {
			break
		}
	}
	return extra
}

// pack writes the delta: the magic, then the operations and the literals (each compressed and
// preceded by its length), then the compressed difference stream.
func pack(ops, lits, diff []byte) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString(Magic)
	zops, err := deflate(ops, zlib.BestCompression)
	if err != nil {
		return nil, err
	}
	zlits, err := deflate(lits, zlib.BestCompression)
	if err != nil {
		return nil, err
	}
	// The difference stream is long and mostly zeros: the best level takes seconds and saves
	// little.
	zdiff, err := deflate(diff, zlib.DefaultCompression)
	if err != nil {
		return nil, err
	}
	var n [4]byte
	for _, z := range [][]byte{zops, zlits} {
		binary.LittleEndian.PutUint32(n[:], uint32(len(z)))
		out.Write(n[:])
		out.Write(z)
	}
	out.Write(zdiff)
	return out.Bytes(), nil
}

// Apply rebuilds the target from base and a delta, refusing a delta that reads outside base or
// its literals or would grow the result past limit bytes.
func Apply(base, delta []byte, limit int) ([]byte, error) {
	if len(delta) < len(Magic)+4 || string(delta[:len(Magic)]) != Magic {
		return nil, errors.New("bindelta: not a delta")
	}
	var streams [3][]byte
	rest := delta[len(Magic):]
	for k := range streams {
		z := rest
		if k < 2 {
			if len(rest) < 4 {
				return nil, errors.New("bindelta: truncated delta")
			}
			n := int(binary.LittleEndian.Uint32(rest))
			if n > len(rest)-4 {
				return nil, errors.New("bindelta: truncated delta")
			}
			z, rest = rest[4:4+n], rest[4+n:]
		}
		bound := limit // the literals and the differences are each at most the result
		if k == 0 {
			bound = opSize * (limit + 1) // an operation adds a byte at least, but the last
		}
		var err error
		if streams[k], err = inflate(z, bound); err != nil {
			return nil, err
		}
	}
	ops, lits, diff := streams[0], streams[1], streams[2]
	if len(ops)%opSize != 0 {
		return nil, errors.New("bindelta: operations cut short")
	}
	var out []byte
	li, xi, pos := 0, 0, 0
	for k := 0; k < len(ops); k += opSize {
		insert := int(binary.LittleEndian.Uint32(ops[k:]))
		copyLen := int(binary.LittleEndian.Uint32(ops[k+4:]))
		pos += int(int32(binary.LittleEndian.Uint32(ops[k+8:])))
		if insert > len(lits)-li || pos < 0 || copyLen > len(base)-pos || copyLen > len(diff)-xi || len(out)+insert+copyLen > limit {
			return nil, fmt.Errorf("bindelta: operation %d reads outside its inputs", k/opSize)
		}
		out = append(out, lits[li:li+insert]...)
		li += insert
		for j := 0; j < copyLen; j++ {
			out = append(out, base[pos+j]+diff[xi+j])
		}
		xi += copyLen
		pos += copyLen
	}
	if li != len(lits) || xi != len(diff) {
		return nil, errors.New("bindelta: literals left over")
	}
	return out, nil
}

func hash(b []byte) uint32 {
	return uint32((binary.LittleEndian.Uint64(b) * 0x9E3779B185EBCA87) >> (64 - tableBits))
}

func matchLen(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(a[i:]) == binary.LittleEndian.Uint64(b[i:]) {
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

func deflate(b []byte, level int) ([]byte, error) {
	var buf bytes.Buffer
	w, err := zlib.NewWriterLevel(&buf, level)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func inflate(b []byte, limit int) ([]byte, error) {
	r, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("bindelta: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("bindelta: %w", err)
	}
	if len(out) > limit {
		return nil, errors.New("bindelta: a stream larger than the limit")
	}
	return out, nil
}
