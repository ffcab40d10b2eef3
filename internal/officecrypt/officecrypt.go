// Package officecrypt encrypts an Office Open XML file (an xlsx) with a password, as
// Excel does: ECMA-376 agile encryption (MS-OFFCRYPTO 2.3.4.10), AES-256 in CBC mode,
// SHA-512, a spin count of 100,000, with the data integrity HMAC, in an OLE compound
// file (MS-CFB) with the data spaces Excel writes.
//
// It streams: the package is read once, in 4,096-byte segments, and encrypted straight
// to the writer, in the same small memory at any size, so that a file of millions of
// rows downloads encrypted about as fast as the disk reads it. The compound file's
// layout follows from the package's size, so the encrypted file's size is known before
// the first byte (EncryptedSize), and the parts that depend on the whole package (its
// HMAC) go at the end of the file. excelize can encrypt only a whole workbook held in
// memory, with the older standard encryption.
//
// The password is used to derive the keys and is not kept.
package officecrypt

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"unicode/utf16"
)

// SpinCount is how many times the password's hash is hashed again: Excel's number,
// which makes each guess of a password cost 100,000 SHA-512 hashes.
const SpinCount = 100000

// MaxPassword is the longest password, in UTF-16 code units: Excel's limit.
const MaxPassword = 255

const (
	segmentSize = 4096
	keyBytes    = 32 // AES-256
	saltBytes   = 16
	blockBytes  = 16
	hashBytes   = 64 // SHA-512
	// largeV3 is the largest stream a version 3 compound file may hold (MS-CFB 2.6.3);
	// a larger package goes into a version 4 file, with 4,096-byte sectors.
	largeV3 = 0x80000000
)

// The block keys of MS-OFFCRYPTO 2.3.4.11 and 2.3.4.14.
var (
	blockVerifierInput = []byte{0xfe, 0xa7, 0xd2, 0x76, 0x3b, 0x4b, 0x9e, 0x79}
	blockVerifierHash  = []byte{0xd7, 0xaa, 0x0f, 0x6d, 0x30, 0x61, 0x34, 0x4e}
	blockKeyValue      = []byte{0x14, 0x6e, 0x0b, 0xe7, 0xab, 0xac, 0xd0, 0xd6}
	blockHMACKey       = []byte{0x5f, 0xb2, 0xad, 0x01, 0x0c, 0xb9, 0xe1, 0xf6}
	blockHMACValue     = []byte{0xa0, 0x67, 0x7f, 0x02, 0xb2, 0x2c, 0x84, 0x33}
)

// ErrPassword is a password that cannot protect a file: empty, too long for Excel, or
// with a NUL.
var ErrPassword = errors.New("password")

// CheckPassword says whether password can encrypt a file (an ErrPassword if not).
func CheckPassword(password string) error {
	switch n := len(utf16.Encode([]rune(password))); {
	case password == "":
		return fmt.Errorf("%w: empty", ErrPassword)
	case n > MaxPassword:
		return fmt.Errorf("%w: %d characters, Excel takes at most %d", ErrPassword, n, MaxPassword)
	case strings.ContainsRune(password, 0):
		return fmt.Errorf("%w: it holds a NUL character", ErrPassword)
	}
	return nil
}

// EncryptedSize is the size of the file Encrypt writes for a package of size bytes.
func EncryptedSize(size int64) int64 {
	l, err := newFile(size, nil).plan(0)
	if err != nil {
		return -1
	}
	return l.fileSize()
}

// Encrypt reads a package of size bytes (an xlsx file) from r and writes it to w
// encrypted with password. It fails if r holds more or fewer bytes than size; what it
// wrote by then is not a file to keep.
func Encrypt(w io.Writer, r io.Reader, size int64, password string) error {
	return encrypt(w, r, size, password, 0)
}

// encrypt is Encrypt into a compound file of sectorSize bytes (0: the smallest that
// holds the package).
func encrypt(dst io.Writer, src io.Reader, size int64, password string, sectorSize int64) error {
	if err := CheckPassword(password); err != nil {
		return err
	}
	// Reads and writes of 64 KiB, not a system call for each 4 KiB segment each way
	// (BENCHMARKS.md, "Encrypted downloads").
	r := bufio.NewReaderSize(src, 64<<10)
	bw := bufio.NewWriterSize(dst, 64<<10)
	if err := encryptBuffered(bw, r, size, password, sectorSize); err != nil {
		return err
	}
	return bw.Flush()
}

func encryptBuffered(w io.Writer, r io.Reader, size int64, password string, sectorSize int64) error {
	k, err := newKeys(password)
	if err != nil {
		return err
	}
	f := newFile(size, k)
	l, err := f.plan(sectorSize)
	if err != nil {
		return err
	}
	if err := l.writeHead(w); err != nil {
		return err
	}
	mac := hmac.New(sha512.New, k.hmacKey)
	pkg, err := f.encryptPackage(w, mac, r, size, k)
	if err != nil {
		return err
	}
	if pkg != nil {
		f.data[f.pkg] = pkg // a package small enough for the mini stream
	} else if pad := int64(l.nBig)*l.sectorSize - f.pkg.size; pad > 0 {
		if _, err := w.Write(make([]byte, pad)); err != nil {
			return err
		}
	}
	info, err := k.info(mac.Sum(nil))
	if err != nil {
		return err
	}
	if int64(len(info)) != f.info.size {
		return fmt.Errorf("encryption info: %d bytes, planned %d", len(info), f.info.size)
	}
	f.data[f.info] = info
	return l.writeMini(w, f.data)
}

// keys is what a password derives for one file.
type keys struct {
	secret       []byte // the package's key, random
	keySalt      []byte // keyData's salt: the segments' and the HMAC's IVs
	passwordSalt []byte // the password key encryptor's salt
	hmacKey      []byte

	encVerifierInput, encVerifierHash, encKeyValue, encHMACKey []byte
}

func newKeys(password string) (*keys, error) {
	k := &keys{
		secret:       make([]byte, keyBytes),
		keySalt:      make([]byte, saltBytes),
		passwordSalt: make([]byte, saltBytes),
		hmacKey:      make([]byte, hashBytes),
	}
	verifier := make([]byte, saltBytes)
	for _, b := range [][]byte{k.secret, k.keySalt, k.passwordSalt, k.hmacKey, verifier} {
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
	}
	// MS-OFFCRYPTO 2.3.4.11: H0 = H(salt + password), Hn = H(iterator + Hn-1), then
	// one key per block key, H(Hfinal + blockKey), cut to the key's size.
	pw := utf16.Encode([]rune(password))
	pwb := make([]byte, 2*len(pw))
	for i, c := range pw {
		binary.LittleEndian.PutUint16(pwb[2*i:], c)
	}
	h := sha512.New()
	h.Write(k.passwordSalt)
	h.Write(pwb)
	sum := h.Sum(nil)
	var it [4]byte
	for i := range uint32(SpinCount) {
		binary.LittleEndian.PutUint32(it[:], i)
		h.Reset()
		h.Write(it[:])
		h.Write(sum)
		sum = h.Sum(sum[:0])
	}
	derive := func(block []byte) []byte {
		return hashOf(sum, block)[:keyBytes]
	}
	var err error
	vh := hashOf(verifier)
	for _, c := range []struct {
		out        *[]byte
		key, iv, v []byte
	}{
		{&k.encVerifierInput, derive(blockVerifierInput), k.passwordSalt, verifier},
		{&k.encVerifierHash, derive(blockVerifierHash), k.passwordSalt, vh},
		{&k.encKeyValue, derive(blockKeyValue), k.passwordSalt, k.secret},
		{&k.encHMACKey, k.secret, hashOf(k.keySalt, blockHMACKey)[:blockBytes], k.hmacKey},
	} {
		if *c.out, err = cbc(c.key, c.iv, c.v); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func hashOf(parts ...[]byte) []byte {
	h := sha512.New()
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// cbc encrypts v, padded with zeros to whole blocks, with AES-CBC.
func cbc(key, iv, v []byte) ([]byte, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, (len(v)+blockBytes-1)/blockBytes*blockBytes)
	copy(out, v)
	cipher.NewCBCEncrypter(b, iv).CryptBlocks(out, out)
	return out, nil
}

// info is the EncryptionInfo stream (MS-OFFCRYPTO 2.3.4.10): a version header and the
// XML that says how the file was encrypted, with the package's HMAC (mac) encrypted.
// Every value has a fixed size, so the stream's size is known before the HMAC is.
func (k *keys) info(mac []byte) ([]byte, error) {
	encMAC := make([]byte, hashBytes)
	if mac != nil {
		var err error
		if encMAC, err = cbc(k.secret, hashOf(k.keySalt, blockHMACValue)[:blockBytes], mac); err != nil {
			return nil, err
		}
	}
	b64 := base64.StdEncoding.EncodeToString
	const algo = `saltSize="16" blockSize="16" keyBits="256" hashSize="64" cipherAlgorithm="AES" cipherChaining="ChainingModeCBC" hashAlgorithm="SHA512"`
	var s strings.Builder
	s.Write([]byte{4, 0, 4, 0, 0x40, 0, 0, 0}) // version 4.4, flags: agile
	s.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\r\n")
	s.WriteString(`<encryption xmlns="http://schemas.microsoft.com/office/2006/encryption" xmlns:p="http://schemas.microsoft.com/office/2006/keyEncryptor/password" xmlns:c="http://schemas.microsoft.com/office/2006/keyEncryptor/certificate">`)
	fmt.Fprintf(&s, `<keyData %s saltValue="%s"/>`, algo, b64(k.keySalt))
	fmt.Fprintf(&s, `<dataIntegrity encryptedHmacKey="%s" encryptedHmacValue="%s"/>`, b64(k.encHMACKey), b64(encMAC))
	s.WriteString(`<keyEncryptors><keyEncryptor uri="http://schemas.microsoft.com/office/2006/keyEncryptor/password">`)
	fmt.Fprintf(&s, `<p:encryptedKey spinCount="%d" %s saltValue="%s" encryptedVerifierHashInput="%s" encryptedVerifierHashValue="%s" encryptedKeyValue="%s"/>`,
		SpinCount, algo, b64(k.passwordSalt), b64(k.encVerifierInput), b64(k.encVerifierHash), b64(k.encKeyValue))
	s.WriteString(`</keyEncryptor></keyEncryptors></encryption>`)
	return []byte(s.String()), nil
}

// encryptPackage writes the EncryptedPackage stream (MS-OFFCRYPTO 2.3.4.15): the
// package's size, then each 4,096-byte segment encrypted with the secret key and an IV
// from the segment's number. A stream too small for a sector of its own is returned
// instead, for the mini stream.
func (f *file) encryptPackage(out io.Writer, mac hash.Hash, r io.Reader, size int64, k *keys) ([]byte, error) {
	var small []byte
	w := io.MultiWriter(out, mac)
	if f.pkg.size < miniCutoff {
		small = make([]byte, 0, f.pkg.size)
		w = appender{&small, mac}
	}
	var head [8]byte
	binary.LittleEndian.PutUint64(head[:], uint64(size))
	if _, err := w.Write(head[:]); err != nil {
		return nil, err
	}
	enc, err := newSegmenter(k)
	if err != nil {
		return nil, err
	}
	// Two stages on two goroutines, since each takes a core's worth: this one reads and
	// encrypts chunks of segments, the caller's HMACs and writes them, three chunks of
	// 64 KiB going round between them. The HMAC (SHA-512 over the whole stream) cannot
	// be split, so it sets the pace when the second core is free; when it is not, the
	// two take turns as one loop did.
	const chunks, chunkSize = 3, 16 * segmentSize
	free, full := make(chan []byte, chunks), make(chan []byte, chunks)
	for range chunks {
		free <- make([]byte, chunkSize)
	}
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(full)
		done <- func() error {
			var at int64
			for seg := uint32(0); at < size; {
				select {
				case <-stop: // before free, which may be ready too
					return nil
				default:
				}
				var b []byte
				select {
				case b = <-free:
				case <-stop:
					return nil
				}
				m := 0
				for m < len(b) && at < size {
					n := int(min(int64(segmentSize), size-at))
					if _, err := io.ReadFull(r, b[m:m+n]); err != nil {
						return fmt.Errorf("read the package at byte %d of %d: %w", at, size, noEOF(err))
					}
					m += enc.segment(b[m:], n, seg)
					at += int64(n)
					seg++
				}
				select {
				case full <- b[:m]:
				case <-stop:
					return nil
				}
			}
			var one [1]byte
			if n, _ := r.Read(one[:]); n > 0 {
				return fmt.Errorf("read the package: more than its %d bytes", size)
			}
			return nil
		}()
	}()
	var werr error
	for b := range full {
		if werr == nil {
			if _, werr = w.Write(b); werr != nil {
				close(stop) // the reader stops at its next chunk; r is not used after return
			}
		}
		free <- b[:cap(b)]
	}
	if err := <-done; err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, werr
	}
	return small, nil
}

// segmenter encrypts the package's segments (MS-OFFCRYPTO 2.3.4.15): each with the
// secret key and an IV from its number.
type segmenter struct {
	k     *keys
	block cipher.Block
	cbc   cipher.BlockMode
	h     hash.Hash
	iv    [hashBytes]byte
}

func newSegmenter(k *keys) (*segmenter, error) {
	block, err := aes.NewCipher(k.secret)
	if err != nil {
		return nil, err
	}
	// One CBC encrypter whose IV is set per segment, where the standard library's has
	// SetIV, not a new one (and its garbage) for every 4 KiB.
	return &segmenter{k: k, block: block, cbc: cipher.NewCBCEncrypter(block, make([]byte, blockBytes)), h: sha512.New()}, nil
}

// segment encrypts segment number seg, the first n bytes of b, in place, padded with
// zeros to whole blocks, and returns its encrypted length.
func (e *segmenter) segment(b []byte, n int, seg uint32) int {
	padded := (n + blockBytes - 1) / blockBytes * blockBytes
	clear(b[n:padded])
	var ix [4]byte
	binary.LittleEndian.PutUint32(ix[:], seg)
	e.h.Reset()
	e.h.Write(e.k.keySalt)
	e.h.Write(ix[:])
	iv := e.h.Sum(e.iv[:0])[:blockBytes]
	if setIV, ok := e.cbc.(ivSetter); ok {
		setIV.SetIV(iv)
	} else {
		e.cbc = cipher.NewCBCEncrypter(e.block, iv)
	}
	e.cbc.CryptBlocks(b[:padded], b[:padded])
	return padded
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("it ended early")
	}
	return err
}

// ivSetter is the standard library's CBC encrypter, which can take a new IV.
type ivSetter interface{ SetIV([]byte) }

// appender keeps what is written (for the mini stream) and passes it to w's HMAC only.
type appender struct {
	b   *[]byte
	mac io.Writer
}

func (a appender) Write(p []byte) (int, error) {
	*a.b = append(*a.b, p...)
	return a.mac.Write(p)
}

// file is the compound file's tree for one encrypted package.
type file struct {
	root, pkg, info *entry
	data            map[*entry][]byte
}

func newFile(size int64, k *keys) *file {
	if k == nil {
		k = &keys{keySalt: make([]byte, saltBytes), passwordSalt: make([]byte, saltBytes),
			encVerifierInput: make([]byte, blockBytes), encVerifierHash: make([]byte, hashBytes),
			encKeyValue: make([]byte, keyBytes), encHMACKey: make([]byte, hashBytes)}
	}
	info, _ := k.info(nil) // the size only: the HMAC is not known yet
	f := &file{data: map[*entry][]byte{}}
	stream := func(name string, b []byte) *entry {
		e := &entry{name: name, typ: typeStream, size: int64(len(b))}
		f.data[e] = b
		return e
	}
	f.pkg = &entry{name: "EncryptedPackage", typ: typeStream, size: 8 + (size+blockBytes-1)/blockBytes*blockBytes}
	f.info = &entry{name: "EncryptionInfo", typ: typeStream, size: int64(len(info))}
	storage := func(name string, kids ...*entry) *entry {
		return &entry{name: name, typ: typeStorage, children: kids}
	}
	f.root = &entry{name: "Root Entry", children: []*entry{
		f.info, f.pkg,
		storage("\x06DataSpaces",
			stream("Version", dataSpaceVersion()),
			stream("DataSpaceMap", dataSpaceMap()),
			storage("DataSpaceInfo", stream("StrongEncryptionDataSpace", dataSpaceDefinition())),
			storage("TransformInfo", storage("StrongEncryptionTransform", stream("\x06Primary", transformInfo()))),
		),
	}}
	return f
}

func (f *file) plan(ss int64) (*layout, error) {
	if ss == 0 {
		ss = 512
		if f.pkg.size > largeV3 {
			ss = 4096
		}
	}
	return plan(f.root, ss)
}

// The data spaces (MS-OFFCRYPTO 2.1): that the package is stored encrypted by the strong
// encryption transform. Readers such as Excel look for them.

// lpp4 is a UNICODE-LP-P4: a length in bytes, the UTF-16 string, padded to 4 bytes.
func lpp4(b []byte, s string) []byte {
	u := utf16.Encode([]rune(s))
	b = binary.LittleEndian.AppendUint32(b, uint32(2*len(u)))
	for _, c := range u {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	if len(u)%2 == 1 {
		b = append(b, 0, 0)
	}
	return b
}

func versions(b []byte) []byte {
	for range 3 { // reader, updater, writer: 1.0
		b = binary.LittleEndian.AppendUint16(b, 1)
		b = binary.LittleEndian.AppendUint16(b, 0)
	}
	return b
}

func dataSpaceVersion() []byte {
	return versions(lpp4(nil, "Microsoft.Container.DataSpaces"))
}

func dataSpaceMap() []byte {
	e := binary.LittleEndian.AppendUint32(nil, 1) // one reference component
	e = binary.LittleEndian.AppendUint32(e, 0)    // a stream
	e = lpp4(e, "EncryptedPackage")
	e = lpp4(e, "StrongEncryptionDataSpace")
	b := binary.LittleEndian.AppendUint32(nil, 8) // header length
	b = binary.LittleEndian.AppendUint32(b, 1)    // one entry
	b = binary.LittleEndian.AppendUint32(b, uint32(4+len(e)))
	return append(b, e...)
}

func dataSpaceDefinition() []byte {
	b := binary.LittleEndian.AppendUint32(nil, 8) // header length
	b = binary.LittleEndian.AppendUint32(b, 1)    // one transform
	return lpp4(b, "StrongEncryptionTransform")
}

func transformInfo() []byte {
	id := lpp4(nil, "{FF9A3F03-56EF-4613-BDD5-5A41C1D07246}")
	b := binary.LittleEndian.AppendUint32(nil, uint32(8+len(id))) // bytes before the name
	b = binary.LittleEndian.AppendUint32(b, 1)                    // transform type
	b = append(b, id...)
	b = lpp4(b, "Microsoft.Container.EncryptionTransform")
	b = versions(b)
	b = binary.LittleEndian.AppendUint32(b, 0) // encryption name: none
	b = binary.LittleEndian.AppendUint32(b, 0) // block size
	b = binary.LittleEndian.AppendUint32(b, 0) // cipher mode
	return binary.LittleEndian.AppendUint32(b, 4)
}
