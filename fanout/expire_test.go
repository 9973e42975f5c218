package fanout

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanoutd/fanoutd/subscriber"
)

// TestExpireAfter: a named subscriber detached for its time to live is
// forgotten (registry and feeds) and counted; an attach before then
// cancels the expiry, and a name reused after it starts afresh.
func TestExpireAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, f := newHub(t, 10)
		c := subscriber.NewMailbox()
		s, _, _ := h.Attach("desk", "", c, nil)
		h.Subscribe(s, tr)
		h.Detach(s, c)
		h.ExpireAfter(s, time.Hour)

		time.Sleep(59 * time.Minute)
		c2 := subscriber.NewMailbox()
		if s2, existed, _ := h.Attach("desk", "", c2, nil); !existed || s2 != s {
			t.Fatal("name forgotten before its time to live")
		}
		time.Sleep(2 * time.Hour) // attached: never expires
		if h.Registry().Named("desk") != s || h.Expired() != 0 {
			t.Fatal("attached subscriber expired")
		}

		h.Detach(s, c2)
		h.ExpireAfter(s, time.Hour)
		time.Sleep(time.Hour - time.Nanosecond)
		synctest.Wait()
		if h.Registry().Named("desk") == nil {
			t.Fatal("expired early")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if h.Registry().Named("desk") != nil || len(f.entries) != 0 || len(f.streams[tr].subs) != 0 {
			t.Fatalf("not forgotten: registry %v, feed entries %d", h.Registry().Named("desk"), len(f.entries))
		}
		if h.Expired() != 1 {
			t.Fatalf("Expired() = %d, want 1", h.Expired())
		}
		if s3, existed, _ := h.Attach("desk", "", subscriber.NewMailbox(), nil); existed || s3 == s || s3.NumStreams() != 0 {
			t.Fatal("a name reused after expiry is not a new subscriber")
		}
	})
}

// TestExpireRacesAttach: an attach that found the subscriber just before
// it expired attaches to a fresh one, never to the forgotten one (whose
// subscriptions are gone from the feeds).
func TestExpireRacesAttach(t *testing.T) {
	h, _ := newHub(t, 10)
	for range 200 {
		c := subscriber.NewMailbox()
		s, _, _ := h.Attach("desk", "", c, nil)
		h.Subscribe(s, tr)
		h.Detach(s, c)
		done := make(chan *subscriber.Subscriber)
		go func() {
			s2, _, _ := h.Attach("desk", "", subscriber.NewMailbox(), nil)
			done <- s2
		}()
		expired := h.reg.Expire(s, 0)
		s2 := <-done
		if h.Registry().Named("desk") != s2 || expired && s2 == s {
			t.Fatalf("attached to a forgotten subscriber (expired %v)", expired)
		}
		h.Forget("desk")
	}
}

// TestNameOwner: a name belongs to the owner that created it.
func TestNameOwner(t *testing.T) {
	h, _ := newHub(t, 10)
	c := subscriber.NewMailbox()
	if _, _, err := h.Attach("deskB", "B", c, nil); err != nil {
		t.Fatal(err)
	}
	took := false
	if _, _, err := h.Attach("deskB", "A", subscriber.NewMailbox(), func(*subscriber.Mailbox) { took = true }); !errors.Is(err, subscriber.ErrNameTaken) || took {
		t.Fatalf("another owner's attach: %v, takeover %v", err, took)
	}
	if c.IsClosed() {
		t.Fatal("the owner's connection was closed")
	}
	h.NewOwnedEphemeral(subscriber.NewMailbox(), "A")
	if got := h.Registry().OwnedBy("A"); len(got) != 1 || got[0].Kind() != subscriber.Ephemeral {
		t.Fatalf("OwnedBy(A) = %v", got)
	}
	if got := h.Registry().OwnedBy("B"); len(got) != 1 || got[0].ID() != "deskB" {
		t.Fatalf("OwnedBy(B) = %v", got)
	}
}
