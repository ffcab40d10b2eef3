package officecrypt

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf16"
)

// The compound file (MS-CFB) this package writes holds one large stream, the encrypted
// package, and a few small ones. Its whole layout follows from the sizes alone, so every
// sector before the large stream (header, FAT, DIFAT, directory, mini FAT) is written
// first, the large stream passes through as it is encrypted, and the mini stream, which
// holds EncryptionInfo with the HMAC of the large stream, comes last. Nothing is held in
// memory but a sector of the FAT at a time.

// Special sector numbers (MS-CFB 2.1).
const (
	difSect    = 0xFFFFFFFC
	fatSect    = 0xFFFFFFFD
	endOfChain = 0xFFFFFFFE
	freeSect   = 0xFFFFFFFF
	noStream   = 0xFFFFFFFF
)

const (
	miniSectorSize = 64
	miniCutoff     = 4096 // streams smaller than this live in the mini stream
	dirEntrySize   = 128
	headerDIFAT    = 109 // FAT sector numbers the header holds itself
)

// Directory entry types.
const (
	typeStorage = 1
	typeStream  = 2
	typeRoot    = 5
)

// entry is one directory entry: a storage with children, or a stream of size bytes.
type entry struct {
	name     string
	typ      byte
	size     int64
	children []*entry

	id                 uint32
	left, right, child uint32
	black              bool
	start              uint32 // first sector (or mini sector)
	mini               bool
}

// layout is where everything of a compound file goes.
type layout struct {
	sectorSize int64
	version    uint16 // 3 (512-byte sectors) or 4 (4096)

	root    *entry
	entries []*entry // in directory order; entries[0] is the root
	big     *entry   // the one stream not in the mini stream (the encrypted package), or nil

	nFAT, nDIFAT, nDir, nMiniFAT, nBig, nMini int64
	firstDIFAT, firstDir, firstMiniFAT        int64
	firstBig, firstMini                       int64
	miniSectors                               int64 // mini sectors in use
	miniChains                                []int64
}

func (l *layout) perSector() int64 { return l.sectorSize / 4 }

// sectors is the number of sectors after the header.
func (l *layout) sectors() int64 {
	return l.nFAT + l.nDIFAT + l.nDir + l.nMiniFAT + l.nBig + l.nMini
}

// fileSize is the compound file's size in bytes: a header sector and the sectors.
func (l *layout) fileSize() int64 { return l.sectorSize * (1 + l.sectors()) }

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// plan lays out root's tree, with sectorSize 512 or 4096.
func plan(root *entry, sectorSize int64) (*layout, error) {
	l := &layout{sectorSize: sectorSize, version: 3, root: root}
	if sectorSize == 4096 {
		l.version = 4
	}
	root.typ = typeRoot
	l.number(root)
	// Mini streams, in directory order, each a run of mini sectors.
	var mini int64
	for _, e := range l.entries[1:] {
		if e.typ != typeStream {
			continue
		}
		if e.size >= miniCutoff {
			if l.big != nil {
				return nil, fmt.Errorf("compound file: two large streams")
			}
			l.big = e
			continue
		}
		e.mini = true
		n := ceilDiv(e.size, miniSectorSize)
		if n == 0 {
			e.start = endOfChain
			continue
		}
		e.start = uint32(mini)
		l.miniChains = append(l.miniChains, mini, n)
		mini += n
	}
	l.miniSectors = mini
	l.nDir = ceilDiv(int64(len(l.entries))*dirEntrySize, sectorSize)
	l.nMiniFAT = ceilDiv(mini*4, sectorSize)
	l.nMini = ceilDiv(mini*miniSectorSize, sectorSize)
	if l.big != nil {
		l.nBig = ceilDiv(l.big.size, sectorSize)
	}
	// The FAT covers every sector, its own and the DIFAT's included.
	for {
		total := l.sectors()
		nFAT := ceilDiv(total, l.perSector())
		nDIFAT := int64(0)
		if nFAT > headerDIFAT {
			nDIFAT = ceilDiv(nFAT-headerDIFAT, l.perSector()-1)
		}
		if nFAT == l.nFAT && nDIFAT == l.nDIFAT {
			break
		}
		l.nFAT, l.nDIFAT = nFAT, nDIFAT
	}
	if l.version == 3 && l.fileSize() > 1<<42 {
		return nil, fmt.Errorf("compound file: too large for 512-byte sectors")
	}
	l.firstDIFAT = l.nFAT
	l.firstDir = l.firstDIFAT + l.nDIFAT
	l.firstMiniFAT = l.firstDir + l.nDir
	l.firstBig = l.firstMiniFAT + l.nMiniFAT
	l.firstMini = l.firstBig + l.nBig
	if l.big != nil {
		l.big.start = uint32(l.firstBig)
	}
	root.start, root.size = endOfChain, mini*miniSectorSize
	if mini > 0 {
		root.start = uint32(l.firstMini)
	}
	return l, nil
}

// number gives every entry its id, depth first, and links each storage's children as a
// balanced binary search tree in the order MS-CFB defines (shorter names first, then by
// upper-cased UTF-16 code units), coloured so that it is a valid red-black tree.
func (l *layout) number(e *entry) {
	e.id = uint32(len(l.entries))
	e.left, e.right, e.child = noStream, noStream, noStream
	e.black = true
	l.entries = append(l.entries, e)
	if len(e.children) == 0 {
		return
	}
	kids := slices.Clone(e.children)
	slices.SortFunc(kids, func(a, b *entry) int { return compareNames(a.name, b.name) })
	for _, k := range kids {
		l.number(k)
	}
	// Full levels of a balanced tree of n nodes; nodes below them are red, which keeps
	// every path's count of black nodes equal.
	full := 0
	for (1<<(full+1))-1 <= len(kids) {
		full++
	}
	var link func(s []*entry, depth int) uint32
	link = func(s []*entry, depth int) uint32 {
		if len(s) == 0 {
			return noStream
		}
		m := len(s) / 2
		s[m].black = depth < full
		s[m].left = link(s[:m], depth+1)
		s[m].right = link(s[m+1:], depth+1)
		return s[m].id
	}
	e.child = link(kids, 0)
}

func compareNames(a, b string) int {
	ua, ub := utf16.Encode([]rune(strings.ToUpper(a))), utf16.Encode([]rune(strings.ToUpper(b)))
	if len(ua) != len(ub) {
		return len(ua) - len(ub)
	}
	return slices.Compare(ua, ub)
}

// writeHead writes everything before the large stream: the header, the FAT, the DIFAT,
// the directory and the mini FAT.
func (l *layout) writeHead(w io.Writer) error {
	ss := l.sectorSize
	buf := make([]byte, ss)
	le := binary.LittleEndian

	// Header (MS-CFB 2.2), padded to a whole sector.
	copy(buf, []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1})
	le.PutUint16(buf[24:], 0x003E)
	le.PutUint16(buf[26:], l.version)
	le.PutUint16(buf[28:], 0xFFFE)
	if l.version == 4 {
		le.PutUint16(buf[30:], 12)
		le.PutUint32(buf[40:], uint32(l.nDir))
	} else {
		le.PutUint16(buf[30:], 9)
	}
	le.PutUint16(buf[32:], 6)
	le.PutUint32(buf[44:], uint32(l.nFAT))
	le.PutUint32(buf[48:], uint32(l.firstDir))
	le.PutUint32(buf[56:], miniCutoff)
	if l.nMiniFAT > 0 {
		le.PutUint32(buf[60:], uint32(l.firstMiniFAT))
	} else {
		le.PutUint32(buf[60:], endOfChain)
	}
	le.PutUint32(buf[64:], uint32(l.nMiniFAT))
	if l.nDIFAT > 0 {
		le.PutUint32(buf[68:], uint32(l.firstDIFAT))
	} else {
		le.PutUint32(buf[68:], endOfChain)
	}
	le.PutUint32(buf[72:], uint32(l.nDIFAT))
	for i := int64(0); i < headerDIFAT; i++ {
		v := uint32(freeSect)
		if i < l.nFAT {
			v = uint32(i)
		}
		le.PutUint32(buf[76+4*i:], v)
	}
	if _, err := w.Write(buf); err != nil {
		return err
	}

	// FAT: one sector at a time.
	total := l.sectors()
	per := l.perSector()
	for s := int64(0); s < l.nFAT; s++ {
		for i := int64(0); i < per; i++ {
			le.PutUint32(buf[4*i:], l.next(s*per+i, total))
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	// DIFAT sectors: the FAT sectors the header could not hold, and a link to the next.
	for d := int64(0); d < l.nDIFAT; d++ {
		for i := int64(0); i < per-1; i++ {
			v := uint32(freeSect)
			if f := headerDIFAT + d*(per-1) + i; f < l.nFAT {
				v = uint32(f)
			}
			le.PutUint32(buf[4*i:], v)
		}
		nextD := uint32(endOfChain)
		if d+1 < l.nDIFAT {
			nextD = uint32(l.firstDIFAT + d + 1)
		}
		le.PutUint32(buf[4*(per-1):], nextD)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	// Directory.
	dir := make([]byte, l.nDir*ss)
	for i := range len(dir) / dirEntrySize {
		d := dir[i*dirEntrySize:]
		le.PutUint32(d[68:], noStream)
		le.PutUint32(d[72:], noStream)
		le.PutUint32(d[76:], noStream)
	}
	for _, e := range l.entries {
		d := dir[int(e.id)*dirEntrySize:]
		name := utf16.Encode([]rune(e.name))
		for i, c := range name {
			le.PutUint16(d[2*i:], c)
		}
		le.PutUint16(d[64:], uint16(2*(len(name)+1)))
		d[66] = e.typ
		if e.black {
			d[67] = 1
		}
		le.PutUint32(d[68:], e.left)
		le.PutUint32(d[72:], e.right)
		le.PutUint32(d[76:], e.child)
		if e.typ != typeStorage {
			le.PutUint32(d[116:], e.start)
			le.PutUint64(d[120:], uint64(e.size))
		}
	}
	if _, err := w.Write(dir); err != nil {
		return err
	}
	// Mini FAT: each mini stream a chain of consecutive mini sectors.
	if l.nMiniFAT > 0 {
		mf := make([]byte, l.nMiniFAT*ss)
		for i := range len(mf) / 4 {
			le.PutUint32(mf[4*i:], freeSect)
		}
		for c := 0; c < len(l.miniChains); c += 2 {
			start, n := l.miniChains[c], l.miniChains[c+1]
			for k := start; k < start+n; k++ {
				v := uint32(k + 1)
				if k == start+n-1 {
					v = endOfChain
				}
				le.PutUint32(mf[4*k:], v)
			}
		}
		if _, err := w.Write(mf); err != nil {
			return err
		}
	}
	return nil
}

// next is FAT entry s: what follows sector s in its chain.
func (l *layout) next(s, total int64) uint32 {
	switch {
	case s >= total:
		return freeSect
	case s < l.nFAT:
		return fatSect
	case s < l.firstDir:
		return difSect
	}
	// The directory, the mini FAT, the large stream and the mini stream are each one
	// chain of consecutive sectors.
	for _, run := range [][2]int64{
		{l.firstDir, l.nDir}, {l.firstMiniFAT, l.nMiniFAT}, {l.firstBig, l.nBig}, {l.firstMini, l.nMini},
	} {
		if s >= run[0] && s < run[0]+run[1] {
			if s == run[0]+run[1]-1 {
				return endOfChain
			}
			return uint32(s + 1)
		}
	}
	return freeSect
}

// writeMini writes the mini stream: each small stream's bytes (data[e] for entry e) at
// its mini sectors, padded to a whole sector.
func (l *layout) writeMini(w io.Writer, data map[*entry][]byte) error {
	if l.nMini == 0 {
		return nil
	}
	buf := make([]byte, l.nMini*l.sectorSize)
	for _, e := range l.entries {
		if !e.mini || e.size == 0 {
			continue
		}
		b := data[e]
		if int64(len(b)) != e.size {
			return fmt.Errorf("compound file: stream %q has %d bytes, planned %d", e.name, len(b), e.size)
		}
		copy(buf[int64(e.start)*miniSectorSize:], b)
	}
	_, err := w.Write(buf)
	return err
}
