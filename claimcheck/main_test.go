package claimcheck_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Idle keep-alive connections of http.DefaultTransport (used by
		// httptest clients) end on their own after the server closes.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
