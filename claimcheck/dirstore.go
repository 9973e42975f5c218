package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultDirRoot is the dir store's default root, the embedded default
// store of a single-process daemon.
const DefaultDirRoot = "./data/claims"

// DirStore is a Store in a local directory: key "a/b.zip" is file
// <root>/a/b.zip. Writes go to a temporary file in the target directory,
// are synced, then renamed over the target, so readers never see a
// partial object.
type DirStore struct {
	name string
	root string
}

var _ Store = (*DirStore)(nil)

// NewDirStore returns a store rooted at root, creating it if needed.
func NewDirStore(name, root string) (*DirStore, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, &StoreError{Op: "open", Store: name, Key: root, Kind: ErrOther, Err: err}
	}
	return &DirStore{name: name, root: root}, nil
}

// Name returns the store's name.
func (s *DirStore) Name() string { return s.name }

// Close does nothing.
func (s *DirStore) Close() error { return nil }

func (s *DirStore) path(op, key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || !fs.ValidPath(key) {
		return "", &StoreError{Op: op, Store: s.name, Key: key, Kind: ErrOther, Err: errors.New("invalid key")}
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

func (s *DirStore) err(op, key string, err error) error {
	k := ErrOther
	switch {
	case errors.Is(err, fs.ErrNotExist):
		k = ErrMissing
	case errors.Is(err, fs.ErrPermission):
		k = ErrForbidden
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		k = ErrUnavailable
	}
	return &StoreError{Op: op, Store: s.name, Key: key, Kind: k, Err: err}
}

// Put writes data under key atomically (temp file, fsync, rename).
func (s *DirStore) Put(ctx context.Context, key string, data []byte) error {
	p, err := s.path("put", key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return s.err("put", key, err)
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return s.err("put", key, err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return s.err("put", key, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return s.err("put", key, err)
	}
	return nil
}

// GetRange opens key and returns a reader of its range.
func (s *DirStore) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	p, err := s.path("get", key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, s.err("get", key, err)
	}
	if off < 0 {
		return nil, &StoreError{Op: "get", Store: s.name, Key: key, Kind: ErrOther, Err: fmt.Errorf("negative offset %d", off)}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, s.err("get", key, err)
	}
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		f.Close()
		if err == nil {
			err = fs.ErrNotExist
		}
		return nil, s.err("get", key, err)
	}
	if n < 0 || off+n > st.Size() {
		n = max(st.Size()-off, 0)
	}
	return readCloser{io.NewSectionReader(f, off, n), f}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// List returns the keys under prefix, in lexical order; temporary files
// of unfinished Puts are not keys.
func (s *DirStore) List(ctx context.Context, prefix string) ([]string, error) {
	dir := prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir = prefix[:i]
	} else {
		dir = ""
	}
	root := filepath.Join(s.root, filepath.FromSlash(dir))
	var keys []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".tmp-") {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		if k := filepath.ToSlash(rel); strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		return nil, s.err("list", prefix, err)
	}
	slices.Sort(keys)
	return keys, nil
}
