package s3store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/claimcheck/claimchecktest"
	"github.com/fanoutd/fanoutd/claimcheck/s3store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

func TestConformanceGofakes3(t *testing.T) {
	claimchecktest.RunStore(t, func(t *testing.T) claimcheck.Store {
		return claimchecktest.FakeS3(t).NewStore(t, "s3", 16)
	})
}

func TestConformanceVersityGW(t *testing.T) {
	srv := claimchecktest.VersityGW(t)
	claimchecktest.RunStore(t, func(t *testing.T) claimcheck.Store {
		return srv.FreshBucket(t).NewStore(t, "s3", 16)
	})
}

func kindOf(t *testing.T, st claimcheck.Store, key string) claimcheck.ErrorKind {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := st.GetRange(ctx, key, 0, 10)
	if err == nil {
		rc.Close()
		return 0
	}
	var se *claimcheck.StoreError
	if !errors.As(err, &se) {
		t.Fatalf("%v (%T) is not a *claimcheck.StoreError", err, err)
	}
	return claimcheck.Classify(err)
}

func TestClassifyFaults(t *testing.T) {
	srv := claimchecktest.FakeS3(t)
	proxy := claimchecktest.NewFaultProxy(t, srv.Endpoint)
	sc := srv.At(proxy.URL).StoreConfig("s3")
	sc.FirstByteTimeout = 300 * time.Millisecond
	st, err := s3store.New(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(context.Background(), "k", []byte("0123456789abc")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fault claimchecktest.Fault
		key   string
		want  claimcheck.ErrorKind
	}{
		{claimchecktest.FaultNone, "k", 0},
		{claimchecktest.FaultNone, "absent", claimcheck.ErrMissing},
		{claimchecktest.FaultThrottle, "k", claimcheck.ErrThrottled},
		{claimchecktest.FaultForbidden, "k", claimcheck.ErrForbidden},
		{claimchecktest.FaultReset, "k", claimcheck.ErrUnavailable},
		{claimchecktest.FaultHang, "k", claimcheck.ErrUnavailable}, // no response headers within FirstByteTimeout
	} {
		if tc.fault == claimchecktest.FaultThrottle {
			proxy.Throttle(0.001, 0)
		} else {
			proxy.Set(tc.fault)
		}
		if got := kindOf(t, st, tc.key); got != tc.want {
			t.Errorf("fault %d key %s: kind %v, want %v", tc.fault, tc.key, got, tc.want)
		}
	}
	proxy.Set(claimchecktest.FaultNone)
	// Exactly one request per GetRange: SDK retries are off.
	proxy.Reset()
	proxy.Throttle(0.001, 0)
	kindOf(t, st, "k")
	if n := len(proxy.Requests()); n != 1 {
		t.Fatalf("%d requests for one throttled GetRange, want 1 (no SDK retries)", n)
	}
}

func TestVersityGWRealErrors(t *testing.T) {
	srv := claimchecktest.VersityGW(t)
	good := srv.NewStore(t, "s3", 4)
	if err := good.Put(context.Background(), "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if k := kindOf(t, good, "absent"); k != claimcheck.ErrMissing {
		t.Errorf("missing key: %v", k)
	}
	bad := *srv
	bad.SecretKey = "wrong"
	if k := kindOf(t, bad.NewStore(t, "s3", 4), "k"); k != claimcheck.ErrForbidden {
		t.Errorf("wrong secret: %v, want forbidden", k)
	}
}
