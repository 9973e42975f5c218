package cluster

import (
	"strings"
	"testing"
)

// TestOptionsValidate: Check accepts what a node runs with and names what it
// refuses.
func TestOptionsValidate(t *testing.T) {
	ok := Options{Role: RoleEdge, NATSURL: "nats://a:4222, nats://b:4222", Token: "t"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if u := ok.URLs(); len(u) != 2 || u[1] != "nats://b:4222" {
		t.Fatalf("URLs %q", u)
	}
	if err := (Options{Role: "all"}).Validate(); err != nil {
		t.Fatalf("role all needs no bus: %v", err)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Role: "leader", NATSURL: "nats://a:1"}, `role "leader"`},
		{Options{Role: RoleEdge}, "no NATS server"},
		{Options{Role: RoleEdge, NATSURL: "nats://a:1", User: "u"}, "User and Password"},
		{Options{Role: RoleEdge, NATSURL: "nats://a:1", Token: "t", Creds: "c"}, "not several"},
		{Options{Role: RoleEdge, NATSURL: "nats://a:1", TLSCert: "c"}, "TLSCert and TLSKey"},
		{Options{Role: RoleIngest, NATSURL: "nats://a:1", KVReplicas: 7}, "KVReplicas 7"},
		{Options{Role: RoleEdge, NATSURL: "nats://a:1", EmbeddedNATS: true}, "only an ingest"},
	} {
		if err := tc.o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}
