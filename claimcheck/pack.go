package claimcheck

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"time"
)

// ErrBadPack is wrapped by every error about a pack's bytes: a corrupt or
// truncated object, or a claim id that does not match the pack it names.
var ErrBadPack = errors.New("claimcheck: bad pack")

// Pack layout. A pack is a ZIP archive, every entry stored uncompressed
// and written in this order, so any zip tool can list and extract it:
//
//	claimcheck.idx   fixed-width index: 32-byte header, then one 256-byte
//	                 entry per claim
//	claims/000000    the claim bytes, one entry per claim, in index order
//	claims/000001
//	…
//	manifest.json    claim id, offset, length, sha256, content type, kind,
//	                 stream, seq and times of every claim
//
// Offsets in the index and the manifest are absolute within the pack, so a
// claim's bytes are one ranged read. The index entry is the pack's first
// entry and its data starts at IndexDataOffset, so the whole index of a
// pack of n claims is the pack's first IndexPrefixLen(n) bytes: one ranged
// read whose length the claim id fixes (it carries n).
//
// Index header (little-endian): "CCIX" | version u16 (2) | 0 u16 | count
// u32 | 0 u32 | manifest offset u64 | manifest length u64.
// Index entry: offset u64 | length u64 | sha256 [32] | content type [48]
// | stream [160], strings NUL-padded. The stream is in the index so the
// gateway can check it against a token's scopes before serving a byte.
//
// Version 1 (packs written before the stream moved into the index) has
// 96-byte entries without the stream; ParseIndexPrefix reads both, and a
// version 1 entry's Stream is empty. Reading IndexPrefixLen(n) bytes
// covers either version's index.
const (
	IndexEntrySize  = 256
	indexEntryV1    = 96
	indexHeaderSize = 32
	indexName       = "claimcheck.idx"
	manifestName    = "manifest.json"
	zipLocalHeader  = 30
	// IndexDataOffset is where the index's bytes start in a pack.
	IndexDataOffset = zipLocalHeader + len(indexName)
	// MaxContentType is the longest content type a claim may carry.
	MaxContentType = 48
	// MaxStream is the longest stream a claim may carry.
	MaxStream = 160
	// DefaultContentType is used for a claim that names none.
	DefaultContentType = "application/octet-stream"
)

// IndexPrefixLen returns how many leading bytes of a pack of count claims
// hold its whole index.
func IndexPrefixLen(count uint32) int64 { return indexPrefixLen(2, count) }

func indexPrefixLen(version uint16, count uint32) int64 {
	size := int64(IndexEntrySize)
	if version == 1 {
		size = indexEntryV1
	}
	return int64(IndexDataOffset) + indexHeaderSize + int64(count)*size
}

func claimName(i int) string { return fmt.Sprintf("claims/%06d", i) }

// Claim kinds.
const (
	KindSnapshot = "snapshot" // a level2 book
	KindCapture  = "capture"  // a closed capture segment
)

// PackClaim is one claim to pack: its bytes and what describes them.
type PackClaim struct {
	Kind        string    // KindSnapshot or KindCapture; defaults to snapshot
	Stream      string    // venue:channel:symbol (a capture: the venue); at most MaxStream bytes
	Seq         uint64    // the stream's seq of the snapshot (first seq of a capture)
	Time        time.Time // the book's (or segment's first event's) time
	Recorded    time.Time // when fanoutd took it
	ContentType string    // defaults to application/octet-stream; at most 48 bytes
	Data        []byte
}

// IndexEntry is one claim's fixed-width index entry.
type IndexEntry struct {
	Offset      int64
	Length      int64
	SHA256      [32]byte
	ContentType string
	// Stream is the claim's stream as packed: venue:channel:symbol for a
	// snapshot, the venue for a capture, empty when none was given or the
	// pack's index is version 1.
	Stream string
}

// Scope returns the stream a token must be allowed to read e's claim:
// the stream itself for a snapshot; "<venue>:*:*" for a capture (a bare
// venue: a segment holds every stream of its venue); "*:*:*" when the
// entry names no stream (a version 1 index, or a claim packed without
// one). A '*' here is a literal that only a wildcard of a token's pattern
// matches, so api.Token.Allows(venue.Stream(e.Scope())) is the check.
func (e IndexEntry) Scope() string {
	switch {
	case e.Stream == "":
		return "*:*:*"
	case !strings.Contains(e.Stream, ":"):
		return e.Stream + ":*:*"
	}
	return e.Stream
}

// ETag returns the entry's strong HTTP entity tag, its quoted hex sha256.
func (e IndexEntry) ETag() string { return `"` + hex.EncodeToString(e.SHA256[:]) + `"` }

// ManifestEntry describes one claim in manifest.json.
type ManifestEntry struct {
	ID          string    `json:"id"`
	Index       int       `json:"index"`
	Offset      int64     `json:"offset"`
	Length      int64     `json:"length"`
	SHA256      string    `json:"sha256"`
	ContentType string    `json:"content_type"`
	Kind        string    `json:"kind"`
	Stream      string    `json:"stream,omitempty"`
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	Recorded    time.Time `json:"recorded"`
}

// Manifest is a pack's manifest.json.
type Manifest struct {
	Version int             `json:"version"`
	Tenant  string          `json:"tenant"`
	Pack    string          `json:"pack"`
	Layout  string          `json:"layout"`
	Claims  []ManifestEntry `json:"claims"`
}

// Pack is a built pack: its bytes and where they go.
type Pack struct {
	Tenant   string
	ID       PackID
	Layout   Layout
	Day      uint16
	Data     []byte // the whole ZIP object
	Entries  []IndexEntry
	Manifest Manifest
}

// Key returns the pack's object key under its layout.
func (p *Pack) Key() string { return PackKey(p.Layout, p.Tenant, p.Day, p.ID) }

// ClaimID returns the id of the pack's claim i.
func (p *Pack) ClaimID(i int) ClaimID {
	return ClaimID{Layout: p.Layout, Day: p.Day, Pack: p.ID, Index: uint32(i), Count: uint32(len(p.Entries))}
}

func dayOf(t time.Time) (uint16, error) {
	d := t.Unix() / 86400
	if t.Unix() < 0 || d > 0xffff {
		return 0, fmt.Errorf("claimcheck: claim time %s outside 1970..2149", t.UTC().Format(time.RFC3339))
	}
	return uint16(d), nil
}

func validContentType(ct string) bool {
	if len(ct) > MaxContentType {
		return false
	}
	return printable(ct)
}

func validStream(s string) bool { return len(s) <= MaxStream && printable(s) }

func printable(ct string) bool {
	for i := 0; i < len(ct); i++ {
		if ct[i] < 0x20 || ct[i] > 0x7e {
			return false
		}
	}
	return true
}

// BuildPack packs claims, in order, for tenant. The output depends only on
// its inputs: the same claims make the same bytes, pack id and key. The
// pack's day (its dt= partition) is the UTC day of the first claim's Time
// (Recorded if Time is zero).
func BuildPack(tenant string, layout Layout, claims []PackClaim) (*Pack, error) {
	if err := CheckTenant(tenant); err != nil {
		return nil, err
	}
	n := len(claims)
	if n == 0 || n > MaxClaimsPerPack {
		return nil, fmt.Errorf("claimcheck: a pack holds 1..%d claims, not %d", MaxClaimsPerPack, n)
	}
	t0 := claims[0].Time
	if t0.IsZero() {
		t0 = claims[0].Recorded
	}
	day, err := dayOf(t0)
	if err != nil {
		return nil, err
	}
	p := &Pack{Tenant: tenant, Layout: layout, Day: day, Entries: make([]IndexEntry, n)}

	// The pack id hashes every input field, length-prefixed.
	h := sha256.New()
	var num [8]byte
	field := func(b []byte) {
		binary.LittleEndian.PutUint64(num[:], uint64(len(b)))
		h.Write(num[:])
		h.Write(b)
	}
	field([]byte("claimcheck-pack-v2")) // v2: the index carries the stream
	field([]byte(tenant))
	field([]byte{byte(layout)})
	kinds := make([]string, n)
	for i, c := range claims {
		ct := c.ContentType
		if ct == "" {
			ct = DefaultContentType
		}
		if !validContentType(ct) {
			return nil, fmt.Errorf("claimcheck: claim %d: content type %q: want printable ASCII, at most %d bytes", i, ct, MaxContentType)
		}
		if !validStream(c.Stream) {
			return nil, fmt.Errorf("claimcheck: claim %d: stream %q: want printable ASCII, at most %d bytes", i, c.Stream, MaxStream)
		}
		kinds[i] = c.Kind
		if kinds[i] == "" {
			kinds[i] = KindSnapshot
		}
		p.Entries[i] = IndexEntry{Length: int64(len(c.Data)), SHA256: sha256.Sum256(c.Data), ContentType: ct, Stream: c.Stream}
		field([]byte(kinds[i]))
		field([]byte(c.Stream))
		var seq [8]byte // not num: field overwrites num with the length
		binary.LittleEndian.PutUint64(seq[:], c.Seq)
		field(seq[:])
		field([]byte(c.Time.UTC().Format(time.RFC3339Nano)))
		field([]byte(c.Recorded.UTC().Format(time.RFC3339Nano)))
		field([]byte(ct))
		field(p.Entries[i].SHA256[:])
	}
	copy(p.ID[:], h.Sum(nil))

	// Offsets are computable before writing: every local header is 30
	// bytes plus the name, with no extra field.
	off := IndexPrefixLen(uint32(n))
	for i := range p.Entries {
		off += zipLocalHeader + int64(len(claimName(i)))
		p.Entries[i].Offset = off
		off += p.Entries[i].Length
	}
	p.Manifest = Manifest{Version: 1, Tenant: tenant, Pack: p.ID.String(), Layout: layout.String(), Claims: make([]ManifestEntry, n)}
	for i, c := range claims {
		e := p.Entries[i]
		p.Manifest.Claims[i] = ManifestEntry{
			ID: p.ClaimID(i).String(), Index: i, Offset: e.Offset, Length: e.Length,
			SHA256: hex.EncodeToString(e.SHA256[:]), ContentType: e.ContentType, Kind: kinds[i],
			Stream: c.Stream, Seq: c.Seq, Time: c.Time.UTC(), Recorded: c.Recorded.UTC(),
		}
	}
	man, err := json.Marshal(p.Manifest)
	if err != nil {
		return nil, err
	}
	manOff := off + zipLocalHeader + int64(len(manifestName))

	idx := make([]byte, indexHeaderSize+n*IndexEntrySize)
	copy(idx, "CCIX")
	binary.LittleEndian.PutUint16(idx[4:], 2)
	binary.LittleEndian.PutUint32(idx[8:], uint32(n))
	binary.LittleEndian.PutUint64(idx[16:], uint64(manOff))
	binary.LittleEndian.PutUint64(idx[24:], uint64(len(man)))
	for i, e := range p.Entries {
		b := idx[indexHeaderSize+i*IndexEntrySize:]
		binary.LittleEndian.PutUint64(b[0:], uint64(e.Offset))
		binary.LittleEndian.PutUint64(b[8:], uint64(e.Length))
		copy(b[16:48], e.SHA256[:])
		copy(b[48:96], e.ContentType)
		copy(b[96:256], e.Stream)
	}

	var buf bytes.Buffer
	buf.Grow(int(manOff) + len(man) + 64*(n+2))
	zw := zip.NewWriter(&buf)
	// The DOS date of every entry is the pack's day, so the bytes are
	// deterministic and zip tools show a sensible date.
	date := time.Unix(int64(day)*86400, 0).UTC()
	dosDate := uint16(0)
	if date.Year() >= 1980 {
		dosDate = uint16((date.Year()-1980)<<9 | int(date.Month())<<5 | date.Day())
	}
	put := func(name string, data []byte, wantOff int64) error {
		w, err := zw.CreateRaw(&zip.FileHeader{
			Name: name, Method: zip.Store, ModifiedDate: dosDate,
			CRC32: crc32.ChecksumIEEE(data), CompressedSize64: uint64(len(data)), UncompressedSize64: uint64(len(data)),
		})
		if err != nil {
			return err
		}
		if err := zw.Flush(); err != nil {
			return err
		}
		if int64(buf.Len()) != wantOff {
			return fmt.Errorf("claimcheck: pack layout: %s data at %d, want %d", name, buf.Len(), wantOff)
		}
		_, err = w.Write(data)
		return err
	}
	if err := put(indexName, idx, int64(IndexDataOffset)); err != nil {
		return nil, err
	}
	for i, c := range claims {
		if err := put(claimName(i), c.Data, p.Entries[i].Offset); err != nil {
			return nil, err
		}
	}
	if err := put(manifestName, man, manOff); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	p.Data = buf.Bytes()
	return p, nil
}

// PackIndex is a pack's parsed index.
type PackIndex struct {
	Version        uint16 // 1 or 2; see the pack layout
	Entries        []IndexEntry
	ManifestOffset int64
	ManifestLength int64
}

// ParseIndexPrefix parses a pack's index from its first bytes b, which
// must hold the whole index of a pack of count claims: IndexPrefixLen(count)
// bytes (or the pack's end, if nearer) cover either index version. Errors
// wrap ErrBadPack.
func ParseIndexPrefix(b []byte, count uint32) (*PackIndex, error) {
	bad := func(why string, args ...any) (*PackIndex, error) {
		return nil, fmt.Errorf("%w: index: %s", ErrBadPack, fmt.Sprintf(why, args...))
	}
	if count == 0 || count > MaxClaimsPerPack {
		return bad("count %d out of range", count)
	}
	if int64(len(b)) < int64(IndexDataOffset)+indexHeaderSize {
		return bad("%d bytes, want at least %d", len(b), IndexDataOffset+indexHeaderSize)
	}
	if binary.LittleEndian.Uint32(b) != 0x04034b50 {
		return bad("not a zip local header")
	}
	if binary.LittleEndian.Uint16(b[8:]) != zip.Store || binary.LittleEndian.Uint16(b[26:]) != uint16(len(indexName)) ||
		binary.LittleEndian.Uint16(b[28:]) != 0 || string(b[zipLocalHeader:IndexDataOffset]) != indexName {
		return bad("first entry is not a stored %s", indexName)
	}
	x := b[IndexDataOffset:]
	version := binary.LittleEndian.Uint16(x[4:])
	if string(x[:4]) != "CCIX" || (version != 1 && version != 2) {
		return bad("bad magic or version")
	}
	entrySize := IndexEntrySize
	if version == 1 {
		entrySize = indexEntryV1
	}
	if int64(len(b)) < indexPrefixLen(version, count) {
		return bad("%d bytes, want %d", len(b), indexPrefixLen(version, count))
	}
	size := binary.LittleEndian.Uint32(b[22:])
	if int64(size) != indexHeaderSize+int64(count)*int64(entrySize) {
		return bad("index size %d does not match count %d", size, count)
	}
	if c := binary.LittleEndian.Uint32(x[8:]); c != count {
		return bad("count %d, claim id says %d", c, count)
	}
	pi := &PackIndex{
		Version:        version,
		ManifestOffset: int64(binary.LittleEndian.Uint64(x[16:])),
		ManifestLength: int64(binary.LittleEndian.Uint64(x[24:])),
		Entries:        make([]IndexEntry, count),
	}
	end := indexPrefixLen(version, count)
	for i := range pi.Entries {
		e := x[indexHeaderSize+i*entrySize:]
		ie := IndexEntry{Offset: int64(binary.LittleEndian.Uint64(e)), Length: int64(binary.LittleEndian.Uint64(e[8:]))}
		copy(ie.SHA256[:], e[16:48])
		ie.ContentType = nulTrim(e[48:96])
		if version >= 2 {
			ie.Stream = nulTrim(e[96:256])
		}
		if ie.Offset < end || ie.Length < 0 || ie.Offset > 1<<50 || ie.Length > 1<<50 || !validContentType(ie.ContentType) || !validStream(ie.Stream) {
			return bad("entry %d: offset %d length %d", i, ie.Offset, ie.Length)
		}
		end = ie.Offset + ie.Length
		pi.Entries[i] = ie
	}
	if pi.ManifestOffset < end || pi.ManifestLength < 0 || pi.ManifestLength > 1<<40 || pi.ManifestOffset > 1<<50 {
		return bad("manifest at %d length %d", pi.ManifestOffset, pi.ManifestLength)
	}
	return pi, nil
}

func nulTrim(b []byte) string {
	if j := bytes.IndexByte(b, 0); j >= 0 {
		b = b[:j]
	}
	return string(b)
}

// ReadPack parses and verifies a whole pack: it must be a valid ZIP whose
// entries are exactly those BuildPack writes, its index must agree with the
// entries' positions and the manifest, and every claim must match its
// sha256. Errors wrap ErrBadPack.
func ReadPack(data []byte) (*Manifest, *PackIndex, error) {
	bad := func(why string, args ...any) (*Manifest, *PackIndex, error) {
		return nil, nil, fmt.Errorf("%w: %s", ErrBadPack, fmt.Sprintf(why, args...))
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return bad("%v", err)
	}
	if len(zr.File) < 3 || zr.File[0].Name != indexName || zr.File[len(zr.File)-1].Name != manifestName {
		return bad("unexpected entries")
	}
	count := uint32(len(zr.File) - 2)
	if count > MaxClaimsPerPack {
		return bad("%d claims", count)
	}
	pi, err := ParseIndexPrefix(data[:min(int64(len(data)), IndexPrefixLen(count))], count)
	if err != nil {
		return nil, nil, err
	}
	read := func(f *zip.File, off, n int64) ([]byte, error) {
		if f.Method != zip.Store {
			return nil, fmt.Errorf("%s is compressed", f.Name)
		}
		do, err := f.DataOffset()
		if err != nil {
			return nil, err
		}
		if do != off || int64(f.UncompressedSize64) != n {
			return nil, fmt.Errorf("%s at %d+%d, index says %d+%d", f.Name, do, f.UncompressedSize64, off, n)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc) // checks the CRC32
	}
	for i, e := range pi.Entries {
		f := zr.File[i+1]
		if f.Name != claimName(i) {
			return bad("entry %d named %q", i+1, f.Name)
		}
		b, err := read(f, e.Offset, e.Length)
		if err != nil {
			return bad("claim %d: %v", i, err)
		}
		if sha256.Sum256(b) != e.SHA256 {
			return bad("claim %d: sha256 mismatch", i)
		}
	}
	mb, err := read(zr.File[len(zr.File)-1], pi.ManifestOffset, pi.ManifestLength)
	if err != nil {
		return bad("manifest: %v", err)
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return bad("manifest: %v", err)
	}
	if len(m.Claims) != int(count) {
		return bad("manifest lists %d claims, index %d", len(m.Claims), count)
	}
	for i, c := range m.Claims {
		e := pi.Entries[i]
		if c.Index != i || c.Offset != e.Offset || c.Length != e.Length || c.SHA256 != hex.EncodeToString(e.SHA256[:]) || c.ContentType != e.ContentType ||
			(pi.Version >= 2 && c.Stream != e.Stream) {
			return bad("manifest claim %d disagrees with the index", i)
		}
	}
	return &m, pi, nil
}
