package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
)

// Store is an object store packs live in. Implementations: DirStore
// (a local directory) and s3store.Store (any S3-compatible endpoint); both
// pass claimchecktest.RunStore.
//
// Every error a Store returns is a *StoreError, so the Reader can classify
// it without knowing the backend.
type Store interface {
	// Name identifies the store in metrics, stats and home-store hashing.
	Name() string
	// Put writes data under key, atomically: a concurrent GetRange sees
	// the old object, the new one or none, never a part.
	Put(ctx context.Context, key string, data []byte) error
	// GetRange returns a reader of n bytes of key starting at off, or of
	// everything from off when n < 0. It returns once the store has
	// answered (its first byte); the body streams from the reader, which
	// the caller must close. A range running past the end is cut at the
	// end. A missing key is an error of kind ErrMissing.
	GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// Close releases the store's resources (idle connections).
	Close() error
}

// ErrorKind classifies a store error for the Reader's limit and for the
// gateway's answer. The zero ErrorKind means "no error".
type ErrorKind uint8

// The error kinds.
const (
	// ErrThrottled: the store asked us to slow down (429, 503 SlowDown).
	// The Reader halves the store's limit.
	ErrThrottled ErrorKind = iota + 1
	// ErrUnavailable: no answer — a connection error, a reset, or no
	// first byte within the store's timeout. The Reader halves the limit.
	ErrUnavailable
	// ErrForbidden: 403. The Reader's limit does not change; the gateway
	// answers 503 store_forbidden with Retry-After: 60.
	ErrForbidden
	// ErrMissing: 404 / NoSuchKey. A success for the Reader's limit.
	ErrMissing
	// ErrOther: anything else (a 500, a corrupt pack). No limit change.
	ErrOther
)

var kindNames = [...]string{"", "throttled", "unavailable", "forbidden", "missing", "other"}

// String returns the kind's name, as used in metrics ("throttled", …).
func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("ErrorKind(%d)", k)
}

// StoreError is the one error type of store operations.
type StoreError struct {
	Op    string    // "get", "put", "index", …
	Store string    // the store's name
	Key   string    // the object key
	Kind  ErrorKind // the classification
	Err   error     // the underlying error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("claimcheck: store %s: %s %s: %s: %v", e.Store, e.Op, e.Key, e.Kind, e.Err)
}

func (e *StoreError) Unwrap() error { return e.Err }

// Classify returns the kind of err: the Kind of a *StoreError in its chain;
// ErrUnavailable for a context deadline or a network error; ErrOther for
// any other non-nil error; 0 for nil.
func Classify(err error) ErrorKind {
	if err == nil {
		return 0
	}
	var se *StoreError
	if errors.As(err, &se) && se.Kind != 0 {
		return se.Kind
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrUnavailable
	}
	return ErrOther
}

// IsMissing reports whether err is a missing key.
func IsMissing(err error) bool { return Classify(err) == ErrMissing }

// Lister is a Store that lists its keys. The history index lists its
// per-segment objects through it; DirStore and s3store.Store implement it.
type Lister interface {
	// List returns every key that starts with prefix, in lexical order.
	List(ctx context.Context, prefix string) ([]string, error)
}
