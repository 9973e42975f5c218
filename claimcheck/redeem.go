package claimcheck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
)

// Redeem reads the claim ref names straight from the stores, without a
// Reader (no limit, queue, cache or coalescing; bounded only by ctx), and
// verifies its sha256. It searches the pack's home store first, then the
// others. This is `fanoutd claims get REF`.
func Redeem(ctx context.Context, stores []Store, ref Ref) ([]byte, IndexEntry, error) {
	names := make([]string, len(stores))
	for i, s := range stores {
		names[i] = s.Name()
	}
	id := ref.ID
	key := PackKey(id.Layout, ref.Tenant, id.Day, id.Pack)
	home := HomeStore(names, ref.Tenant, id.Pack)
	var firstErr error
	for _, i := range searchOrder(len(stores), home) {
		s := stores[i]
		b, err := readAll(ctx, s, key, 0, IndexPrefixLen(id.Count))
		if err != nil {
			if firstErr == nil && !IsMissing(err) {
				firstErr = err
			}
			continue
		}
		pi, err := ParseIndexPrefix(b, id.Count)
		if err != nil {
			return nil, IndexEntry{}, &StoreError{Op: "index", Store: s.Name(), Key: key, Kind: ErrMissing, Err: err}
		}
		e := pi.Entries[id.Index]
		data, err := readAll(ctx, s, key, e.Offset, e.Length)
		if err != nil {
			return nil, e, err
		}
		if int64(len(data)) != e.Length || sha256.Sum256(data) != e.SHA256 {
			return nil, e, &StoreError{Op: "redeem", Store: s.Name(), Key: key, Kind: ErrOther,
				Err: fmt.Errorf("%w: claim %d: sha256 mismatch", ErrBadPack, id.Index)}
		}
		return data, e, nil
	}
	if firstErr != nil {
		return nil, IndexEntry{}, firstErr
	}
	return nil, IndexEntry{}, &StoreError{Op: "redeem", Store: names[home], Key: key, Kind: ErrMissing, Err: ErrNotFound}
}

func readAll(ctx context.Context, s Store, key string, off, n int64) ([]byte, error) {
	rc, err := s.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, rc); err != nil {
		return nil, &StoreError{Op: "read", Store: s.Name(), Key: key, Kind: ErrUnavailable, Err: err}
	}
	return buf.Bytes(), nil
}
