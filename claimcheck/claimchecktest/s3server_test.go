package claimchecktest

import "testing"

func TestInstallPath(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"\n/home/u/go\n", "/home/u/go/bin/versitygw"}, // GOBIN unset: the first line is empty
		{"/opt/bin\n/home/u/go\n", "/opt/bin/versitygw"},
		{"\n/a/go:/b/go\n", "/a/go/bin/versitygw"},
	} {
		if got := installPath(tc.env); got != tc.want {
			t.Errorf("installPath(%q) = %q, want %q", tc.env, got, tc.want)
		}
	}
}
