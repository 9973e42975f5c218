// Package s3store is the claimcheck.Store of any S3-compatible endpoint,
// through aws-sdk-go-v2 with the SDK's retries off: the claimcheck.Reader
// is the retry and congestion policy, so it must see every 503.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/fanoutd/fanoutd/claimcheck"
)

// Store is a bucket of an S3-compatible endpoint.
type Store struct {
	name   string
	bucket string
	client *s3.Client

	mu         sync.Mutex // protects transports
	transports []*http.Transport
}

var _ claimcheck.Store = (*Store)(nil)

// Open is the claimcheck.StoreOpener of kind s3.
func Open(ctx context.Context, sc claimcheck.StoreConfig) (claimcheck.Store, error) {
	return New(ctx, sc)
}

// New returns a store for sc. Its connection pool keeps up to
// sc.MaxConns (default 64) connections to the endpoint — the reader's
// ceiling plus the writer's share, so a full limit of requests never waits
// for a connection — and gives up on a response's headers after
// sc.FirstByteTimeout (default 5s). Credentials are sc's static keys if
// set, else the usual AWS environment and files.
func New(ctx context.Context, sc claimcheck.StoreConfig) (*Store, error) {
	if sc.Bucket == "" {
		return nil, errors.New("s3store: bucket is required")
	}
	if sc.Name == "" {
		sc.Name = "s3"
	}
	if sc.MaxConns <= 0 {
		sc.MaxConns = 64
	}
	if sc.FirstByteTimeout <= 0 {
		sc.FirstByteTimeout = 5 * time.Second
	}
	region := sc.Region
	if region == "" {
		region = os.Getenv("AWS_REGION")
	}
	if region == "" {
		region = "us-east-1"
	}
	st := &Store{name: sc.Name, bucket: sc.Bucket}
	// A BuildableClient, not an *http.Client: the config loader must be
	// able to add AWS_CA_BUNDLE's roots to its transport.
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = sc.MaxConns
		tr.MaxIdleConnsPerHost = sc.MaxConns // the SDK's default is 10, below any useful ceiling
		tr.MaxConnsPerHost = sc.MaxConns
		tr.ResponseHeaderTimeout = sc.FirstByteTimeout
		tr.IdleConnTimeout = 90 * time.Second
		st.mu.Lock()
		st.transports = append(st.transports, tr)
		st.mu.Unlock()
	}).WithDialerOptions(func(d *net.Dialer) { d.Timeout = 5 * time.Second })
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		config.WithHTTPClient(hc),
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if sc.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(sc.AccessKeyID, sc.SecretAccessKey, sc.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3store: %w", err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if sc.Endpoint != "" {
			o.BaseEndpoint = aws.String(sc.Endpoint)
		}
		o.UsePathStyle = sc.PathStyle
		o.Retryer = aws.NopRetryer{}
		// Packs carry their own sha256s; flexible checksums would add
		// aws-chunked uploads some S3-compatible servers reject.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	st.client = client
	return st, nil
}

// Client returns the store's S3 client (tests create buckets with it).
func (s *Store) Client() *s3.Client { return s.client }

// Name returns the store's name.
func (s *Store) Name() string { return s.name }

// Close closes idle connections.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tr := range s.transports {
		tr.CloseIdleConnections()
	}
	return nil
}

// Put uploads data under key with one PutObject (atomic in S3).
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return s.err("put", key, err)
	}
	return nil
}

// GetRange issues one ranged GetObject; it returns when the response
// headers arrive. A range starting at or past the end is an empty body.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, &claimcheck.StoreError{Op: "get", Store: s.name, Key: key, Kind: claimcheck.ErrOther, Err: fmt.Errorf("negative offset %d", off)}
	}
	if n == 0 {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}
	switch {
	case n > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	case off > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange" {
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, s.err("get", key, err)
	}
	return out.Body, nil
}

func (s *Store) err(op, key string, err error) error {
	return &claimcheck.StoreError{Op: op, Store: s.name, Key: key, Kind: Classify(err), Err: err}
}

// Classify maps an SDK error to a claimcheck.ErrorKind:
//
//	throttled:   429, 503, or codes SlowDown, Throttling, ThrottlingException,
//	             RequestLimitExceeded, TooManyRequests
//	unavailable: no response (dial, reset, EOF, response-header timeout,
//	             context deadline), 502, 504
//	forbidden:   403 (AccessDenied, SignatureDoesNotMatch, …)
//	missing:     404 (NoSuchKey, NotFound, NoSuchBucket)
//	other:       anything else (400, 500, …)
func Classify(err error) claimcheck.ErrorKind {
	if err == nil {
		return 0
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return claimcheck.ErrMissing
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests", "TooManyRequestsException":
			return claimcheck.ErrThrottled
		case "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId":
			return claimcheck.ErrForbidden
		case "NoSuchKey", "NoSuchBucket", "NotFound":
			return claimcheck.ErrMissing
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		switch c := re.HTTPStatusCode(); {
		case c == 429 || c == 503:
			return claimcheck.ErrThrottled
		case c == 403:
			return claimcheck.ErrForbidden
		case c == 404:
			return claimcheck.ErrMissing
		case c == 502 || c == 504:
			return claimcheck.ErrUnavailable
		default:
			return claimcheck.ErrOther
		}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return claimcheck.ErrUnavailable
	}
	return claimcheck.ErrOther
}

// List returns the keys under prefix (ListObjectsV2, every page), in
// lexical order.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.err("list", prefix, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

var _ claimcheck.Lister = (*Store)(nil)
