package subscriber

import (
	"errors"
	"testing"
	"time"
)

// TestLimitNamed: past the per-owner and total bounds a new name is
// refused with which bound it passed; an existing name still attaches;
// a forgotten or expired one makes room again.
func TestLimitNamed(t *testing.T) {
	r := NewRegistry()
	r.LimitNamed(3, 2)
	attach := func(name, owner string) error { _, _, err := r.AttachFrom(name, owner, nil, nil, nil); return err }
	for _, n := range []string{"a1", "a2"} {
		if err := attach(n, "a"); err != nil {
			t.Fatal(err)
		}
	}
	var le *NamedLimitError
	if err := attach("a3", "a"); !errors.As(err, &le) || !le.PerOwner || le.Limit != 2 {
		t.Fatalf("owner a's third name: %v, want its limit of 2", err)
	}
	if err := r.NamedRoom("a"); err == nil {
		t.Fatal("NamedRoom(a) found room")
	}
	if err := attach("a1", "a"); err != nil {
		t.Fatalf("reattaching an existing name past the limit: %v", err)
	}
	if err := attach("b1", "b"); err != nil {
		t.Fatal(err)
	}
	if err := attach("c1", "c"); !errors.As(err, &le) || le.PerOwner || le.Limit != 3 {
		t.Fatalf("a fourth name in all: %v, want the total limit of 3", err)
	}
	if _, named := r.Count(); named != 3 {
		t.Fatalf("%d named, want 3", named)
	}
	r.Forget("a2")
	if err := attach("a3", "a"); err != nil {
		t.Fatalf("after a forget: %v", err)
	}
	s := r.Named("b1")
	if !r.Expire(s, -time.Second) {
		t.Fatal("b1 not expired")
	}
	if err := attach("c1", "c"); err != nil {
		t.Fatalf("after an expiry: %v", err)
	}
}
