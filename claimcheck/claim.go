package claimcheck

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Each is wrapped, never returned bare, so the message
// names the offending value.
var (
	ErrBadTenant  = errors.New("claimcheck: invalid tenant")
	ErrBadClaimID = errors.New("claimcheck: invalid claim id")
	ErrBadRef     = errors.New("claimcheck: invalid claim reference")
)

// MaxClaimsPerPack bounds how many claims one pack holds. The index of a
// full pack is MaxClaimsPerPack*IndexEntrySize bytes (16 MiB), still one
// ranged read.
const MaxClaimsPerPack = 1 << 16

// ValidTenant reports whether t matches [A-Za-z0-9_-]{1,64}.
func ValidTenant(t string) bool {
	if len(t) == 0 || len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// CheckTenant returns nil if t is a valid tenant, or an error wrapping
// ErrBadTenant that names t.
func CheckTenant(t string) error {
	if !ValidTenant(t) {
		return fmt.Errorf("%w %q: want [A-Za-z0-9_-]{1,64}", ErrBadTenant, t)
	}
	return nil
}

// PackID names a pack. It is the first 16 bytes of a SHA-256 over the
// pack's tenant and claims (see BuildPack), so the same claims always make
// the same pack under the same key.
type PackID [16]byte

// String returns the pack id as 32 lower-case hex digits.
func (p PackID) String() string { return hex.EncodeToString(p[:]) }

// Layout is how pack keys are laid out in a store.
type Layout uint8

// The key layouts. The zero Layout is flat.
const (
	// LayoutFlat keys a pack as claims/tenant=<t>/dt=<YYYY-MM-DD>/<pack>.zip.
	LayoutFlat Layout = iota
	// LayoutSharded puts a 4-hex-digit hash of tenant and pack first,
	// <hhhh>/claims/tenant=<t>/dt=<YYYY-MM-DD>/<pack>.zip, so one tenant's
	// packs spread over many S3 partitions.
	LayoutSharded
)

// String returns "flat" or "sharded".
func (l Layout) String() string {
	if l == LayoutSharded {
		return "sharded"
	}
	return "flat"
}

// ParseLayout returns the layout named s ("flat" or "sharded").
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "flat":
		return LayoutFlat, nil
	case "sharded":
		return LayoutSharded, nil
	}
	return 0, fmt.Errorf("claimcheck: unknown key layout %q (want flat or sharded)", s)
}

// ClaimID locates one claim without any lookup: the pack's key (layout,
// day, pack id; the tenant comes from the URL), the claim's position in the
// pack and the pack's claim count, which fixes the length of the index
// prefix to read.
//
// Its string form is opaque and URL-safe: unpadded base64url of
//
//	version (1 byte, 1) | layout (1 byte) | day (2 bytes BE, days since
//	1970-01-01 UTC) | pack id (16 bytes) | index (uvarint) | count (uvarint)
//
// 22 to 26 bytes: 30 characters for a pack of at most 127 claims (both
// uvarints one byte), up to 35 for the largest packs.
type ClaimID struct {
	Layout Layout
	Day    uint16 // days since 1970-01-01 UTC; the pack's dt= partition
	Pack   PackID
	Index  uint32 // position of the claim in the pack, < Count
	Count  uint32 // claims in the pack, 1..MaxClaimsPerPack
}

const claimIDVersion = 1

// String encodes id; ParseClaimID(id.String()) == id.
func (id ClaimID) String() string {
	var b [1 + 1 + 2 + 16 + 2*binary.MaxVarintLen32]byte
	b[0] = claimIDVersion
	b[1] = byte(id.Layout)
	binary.BigEndian.PutUint16(b[2:], id.Day)
	copy(b[4:], id.Pack[:])
	n := 20
	n += binary.PutUvarint(b[n:], uint64(id.Index))
	n += binary.PutUvarint(b[n:], uint64(id.Count))
	return base64.RawURLEncoding.EncodeToString(b[:n])
}

// Date returns the UTC day of the pack's dt= partition.
func (id ClaimID) Date() time.Time {
	return time.Unix(int64(id.Day)*86400, 0).UTC()
}

// ParseClaimID decodes s. It accepts only the canonical encoding, so one
// claim has exactly one id (and one cache key). Errors wrap ErrBadClaimID.
func ParseClaimID(s string) (ClaimID, error) {
	bad := func(why string) (ClaimID, error) {
		if len(s) > 80 {
			s = s[:80] + "…"
		}
		return ClaimID{}, fmt.Errorf("%w %q: %s", ErrBadClaimID, s, why)
	}
	if len(s) < 27 || len(s) > 48 {
		return bad("wrong length")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < 22 { // the decoder skips \r and \n, so check the length here
		return bad("not base64url of a claim id")
	}
	if b[0] != claimIDVersion {
		return bad("unknown version")
	}
	if b[1] > byte(LayoutSharded) {
		return bad("unknown layout")
	}
	var id ClaimID
	id.Layout = Layout(b[1])
	id.Day = binary.BigEndian.Uint16(b[2:])
	copy(id.Pack[:], b[4:20])
	r := bytes.NewReader(b[20:])
	idx, err := binary.ReadUvarint(r)
	if err != nil {
		return bad("truncated index")
	}
	cnt, err := binary.ReadUvarint(r)
	if err != nil {
		return bad("truncated count")
	}
	if r.Len() != 0 {
		return bad("trailing bytes")
	}
	if cnt == 0 || cnt > MaxClaimsPerPack || idx >= cnt {
		return bad("index out of range")
	}
	id.Index, id.Count = uint32(idx), uint32(cnt)
	if id.String() != s {
		return bad("not canonical")
	}
	return id, nil
}

// Ref is a full claim reference: tenant and claim id. Its string form is
// "<tenant>/<claim id>"; ParseRef also accepts a claim URL path or a full
// URL ending in /v1/claims/<tenant>/<claim id>.
type Ref struct {
	Tenant string
	ID     ClaimID
}

// String returns "<tenant>/<claim id>".
func (r Ref) String() string { return r.Tenant + "/" + r.ID.String() }

// Path returns the gateway path of the claim, "/v1/claims/<tenant>/<id>".
func (r Ref) Path() string { return "/v1/claims/" + r.String() }

// ParseRef parses "<tenant>/<id>", "/v1/claims/<tenant>/<id>" or
// "http(s)://host/…/v1/claims/<tenant>/<id>". Errors wrap ErrBadRef and the
// tenant or id error.
func ParseRef(s string) (Ref, error) {
	rest := s
	if i := strings.Index(rest, "/v1/claims/"); i >= 0 {
		rest = rest[i+len("/v1/claims/"):]
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	t, id, ok := strings.Cut(rest, "/")
	if !ok {
		return Ref{}, fmt.Errorf("%w %q: want <tenant>/<claim id>", ErrBadRef, s)
	}
	if err := CheckTenant(t); err != nil {
		return Ref{}, fmt.Errorf("%w: %w", ErrBadRef, err)
	}
	cid, err := ParseClaimID(id)
	if err != nil {
		return Ref{}, fmt.Errorf("%w: %w", ErrBadRef, err)
	}
	return Ref{Tenant: t, ID: cid}, nil
}
