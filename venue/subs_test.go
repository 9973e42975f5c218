package venue_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanoutd/fanoutd/venue"
)

// The ledger's life on one connection: a plan asks what is wanted, in the
// order it was wanted; answers settle it; an expired or limited key is asked
// again only after its backoff, which doubles; an unwanted key is dropped;
// a new connection asks again all but what the venue refused.
func TestSubsPlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := venue.Subs{Deadline: 5 * time.Second}
		s.Want("b", "a", "c")
		ask, drop := s.Plan(time.Now(), nil)
		if !slices.Equal(ask, []string{"b", "a", "c"}) || drop != nil {
			t.Fatalf("first plan = %v, %v; want [b a c] and nothing dropped", ask, drop)
		}
		if ask, _ := s.Plan(time.Now(), nil); ask != nil {
			t.Fatalf("asked again before any answer: %v", ask)
		}
		id := s.Request(venue.SubRequest{Op: "subscribe", Keys: []string{"b", "a"}, At: time.Now()})
		if s.AskedIn("b") != id || s.AskedIn("c") != 0 {
			t.Fatalf("AskedIn b = %d, c = %d; want %d and 0", s.AskedIn("b"), s.AskedIn("c"), id)
		}
		if late := s.Unanswered(time.Now(), time.Second); late != nil {
			t.Fatalf("unanswered at once: %v", late)
		}
		time.Sleep(time.Second)
		if late := s.Unanswered(time.Now(), time.Second); !slices.Equal(late, []int64{id}) {
			t.Fatalf("Unanswered after 1 s = %v, want [%d]", late, id)
		}
		r, ok := s.Answer(id)
		if !ok || r.Op != "subscribe" || !slices.Equal(r.Keys, []string{"b", "a"}) {
			t.Fatalf("Answer(%d) = %+v, %v", id, r, ok)
		}
		if _, ok := s.Answer(id); ok {
			t.Fatal("a request answered twice")
		}
		s.Ack("b")
		s.Refuse("a")
		if s.Answered() {
			t.Fatal("answered with c unanswered")
		}
		// c is never answered: it expires after the deadline, not before.
		time.Sleep(4 * time.Second)
		if exp := s.Expire(time.Now()); exp != nil {
			t.Fatalf("expired at the deadline: %v", exp)
		}
		time.Sleep(time.Millisecond)
		if exp := s.Expire(time.Now()); !slices.Equal(exp, []string{"c"}) {
			t.Fatalf("Expire = %v, want [c]", exp)
		}
		// Backoff: 1 s less up to 20% jitter, then 2 s.
		if ask, _ := s.Plan(time.Now(), nil); ask != nil {
			t.Fatalf("expired key asked at once: %v", ask)
		}
		time.Sleep(time.Second)
		if ask, _ := s.Plan(time.Now(), nil); !slices.Equal(ask, []string{"c"}) {
			t.Fatalf("after its backoff the plan asks %v, want [c]", ask)
		}
		if d := s.Limit("c", time.Now()); d <= 1600*time.Millisecond || d > 2*time.Second {
			t.Fatalf("second backoff %v, want 1.6–2 s", d)
		}
		time.Sleep(2 * time.Second)
		s.Plan(time.Now(), nil)
		s.Ack("c")
		if !s.Answered() || s.State("c") != venue.SubAcked || s.State("a") != venue.SubRefused {
			t.Fatalf("states b %v a %v c %v", s.State("b"), s.State("a"), s.State("c"))
		}
		// Unwanted: b was acked, so it is dropped; a was refused, so not.
		s.Unwant("b", "a")
		if ask, drop := s.Plan(time.Now(), nil); ask != nil || !slices.Equal(drop, []string{"b"}) {
			t.Fatalf("plan after Unwant = %v, %v; want drop [b]", ask, drop)
		}
		// A new connection: c is asked again; a refused key wanted anew too.
		s.Want("a")
		s.Reset()
		if ask, _ := s.Plan(time.Now(), nil); !slices.Equal(ask, []string{"c", "a"}) {
			t.Fatalf("plan on a new connection = %v, want [c a]", ask)
		}
	})
}

// A shared backoff (a venue that limits the connection) fails once for all
// the keys a limit takes back, and they come back together.
func TestSubsShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := venue.Subs{Shared: true}
		s.Want("a", "b", "c")
		s.Plan(time.Now(), nil)
		s.Ack("a")
		if back := s.LimitAsked(time.Now()); !slices.Equal(back, []string{"b", "c"}) {
			t.Fatalf("LimitAsked = %v", back)
		}
		s.Want("d") // new keys wait out the connection's backoff too
		if ask, _ := s.Plan(time.Now(), nil); ask != nil {
			t.Fatalf("asked during the backoff: %v", ask)
		}
		time.Sleep(time.Second)
		if ask, _ := s.Plan(time.Now(), nil); !slices.Equal(ask, []string{"b", "c", "d"}) {
			t.Fatalf("after the backoff = %v, want [b c d] in one plan", ask)
		}
		// Acked, all of them: the backoff is over, the next limit starts at 1 s again.
		for _, k := range []string{"b", "c", "d"} {
			s.Ack(k)
		}
		s.Want("e")
		s.Plan(time.Now(), nil)
		if d := s.Limit("e", time.Now()); d > time.Second {
			t.Fatalf("backoff after every key was acked = %v, want at most 1 s", d)
		}
	})
}

// Resyncs: at most Max in flight, the queue in order, a key in flight asked
// again after its backoff until Whole, a key no longer wanted skipped.
func TestResyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := venue.Resyncs{Max: 2, Retry: venue.Retry{Base: 10 * time.Second}}
		for _, k := range []string{"x", "y", "gone", "z", "x"} {
			r.Queue(k)
		}
		wanted := func(k string) bool { return k != "gone" }
		if due := r.Due(time.Now(), wanted); !slices.Equal(due, []string{"x", "y"}) {
			t.Fatalf("Due = %v, want [x y]", due)
		}
		if due := r.Due(time.Now(), wanted); due != nil {
			t.Fatalf("Due again at once = %v", due)
		}
		r.Whole("x")
		if due := r.Due(time.Now(), wanted); !slices.Equal(due, []string{"z"}) {
			t.Fatalf("Due after x is whole = %v, want [z] (gone is not wanted)", due)
		}
		time.Sleep(10 * time.Second)
		if due := r.Due(time.Now(), wanted); !slices.Equal(due, []string{"y", "z"}) {
			t.Fatalf("Due after the backoff = %v, want [y z] asked again", due)
		}
		if r.InFlight() != 2 || !r.Pending("y") || r.Pending("x") {
			t.Fatalf("in flight %d, y pending %v, x pending %v", r.InFlight(), r.Pending("y"), r.Pending("x"))
		}
		r.Reset()
		if r.InFlight() != 0 || r.Pending("y") {
			t.Fatal("Reset kept resyncs")
		}
	})
}

// planned renders a plan as "op key,key" lines, resync halves marked "~".
func planned(rs []venue.SubRequest) []string {
	var out []string
	for _, r := range rs {
		op := r.Op
		if r.Resync {
			op = "~" + op
		}
		out = append(out, op+" "+strings.Join(r.Keys, ","))
	}
	return out
}

// Batch keeps to each of a venue's limits: keys a request, bytes a
// request (a key over the cap alone still goes), one group a request.
func TestSubLimitsBatch(t *testing.T) {
	keys := []string{"book|A", "trade|A", "book|B", "trade|B", "book|C"}
	for _, tc := range []struct {
		name string
		l    venue.SubLimits
		want [][]string
	}{
		{"none", venue.SubLimits{}, [][]string{keys}},
		{"keys", venue.SubLimits{MaxKeys: 2}, [][]string{{"book|A", "trade|A"}, {"book|B", "trade|B"}, {"book|C"}}},
		// 10 + (6+3) + (7+3) = 29 ≤ 30; a third key would be 38.
		{"bytes", venue.SubLimits{MaxBytes: 30, Overhead: 10, KeyOverhead: 3},
			[][]string{{"book|A", "trade|A"}, {"book|B", "trade|B"}, {"book|C"}}},
		{"oversized key", venue.SubLimits{MaxBytes: 5}, [][]string{{"book|A"}, {"trade|A"}, {"book|B"}, {"trade|B"}, {"book|C"}}},
		{"group", venue.SubLimits{MaxKeys: 2, Group: func(k string) string { ch, _, _ := strings.Cut(k, "|"); return ch }},
			[][]string{{"book|A", "book|B"}, {"book|C"}, {"trade|A", "trade|B"}}},
	} {
		if got := tc.l.Batch(keys); !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s: Batch = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := (venue.SubLimits{MaxKeys: 2}).Batch(nil); got != nil {
		t.Errorf("Batch(nil) = %v", got)
	}
}

// Flush is the whole plan of a connection, in order: drops, resyncs due,
// asks; tracked requests carry ids and, behind a pacer, the time it sends
// them.
func TestSubsFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := venue.Subs{Track: true, Limits: venue.SubLimits{MaxKeys: 2, Interval: 250 * time.Millisecond}}
		s.Want("a", "b", "c")
		t0 := time.Now()
		rs := s.Flush(t0, nil)
		if got := planned(rs); !slices.Equal(got, []string{"subscribe a,b", "subscribe c"}) {
			t.Fatalf("first plan %v", got)
		}
		if rs[0].ID != 1 || rs[1].ID != 2 || !rs[0].At.Equal(t0) || !rs[1].At.Equal(t0.Add(250*time.Millisecond)) {
			t.Fatalf("ids/times %d@%v %d@%v; want 1 at once and 2 a pacer's interval later", rs[0].ID, rs[0].At.Sub(t0), rs[1].ID, rs[1].At.Sub(t0))
		}
		if r, ok := s.Sent(2); !ok || !slices.Equal(r.Keys, []string{"c"}) {
			t.Fatalf("request 2 not recorded: %+v", r)
		}
		if rs := s.Flush(time.Now(), nil); rs != nil {
			t.Fatalf("nothing new, yet planned %v", planned(rs))
		}
		for _, k := range []string{"a", "b", "c"} {
			s.Ack(k)
		}
		// A resync, an unwanted key and a new one, in one plan.
		if !s.Resync("a") || s.Resync("nope") {
			t.Fatal("Resync of a subscribed key refused, or of an unknown key accepted")
		}
		s.WantOnly("a", "b", "d")
		if got := planned(s.Flush(time.Now(), nil)); !slices.Equal(got, []string{"unsubscribe c", "~unsubscribe a", "~subscribe a", "subscribe d"}) {
			t.Fatalf("plan %v", got)
		}
		// Its book not whole: asked again after the backoff (1 s less jitter), not before.
		time.Sleep(700 * time.Millisecond)
		if rs := s.Flush(time.Now(), nil); rs != nil {
			t.Fatalf("resync asked again before its backoff: %v", planned(rs))
		}
		time.Sleep(300 * time.Millisecond)
		if got := planned(s.Flush(time.Now(), nil)); !slices.Equal(got, []string{"~unsubscribe a", "~subscribe a"}) {
			t.Fatalf("after the backoff %v", got)
		}
		s.Whole("a")
		time.Sleep(time.Minute)
		if rs := s.Flush(time.Now(), nil); rs != nil {
			t.Fatalf("a whole book resynced again: %v", planned(rs))
		}
	})
}

// Resyncs run at most Resyncs.Max at a time; the rest wait their turn.
func TestSubsResyncsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := venue.Subs{Resyncs: venue.Resyncs{Max: 1}}
		s.Want("a", "b")
		s.Flush(time.Now(), nil)
		s.Resync("a")
		s.Resync("b")
		if got := planned(s.Flush(time.Now(), nil)); !slices.Equal(got, []string{"~unsubscribe a", "~subscribe a"}) {
			t.Fatalf("plan %v, want a's resync alone", got)
		}
		s.Whole("a")
		if got := planned(s.Flush(time.Now(), nil)); !slices.Equal(got, []string{"~unsubscribe b", "~subscribe b"}) {
			t.Fatalf("plan %v, want b's resync once a is whole", got)
		}
	})
}

// Unanswered past the Deadline: a subscribe is asked again after its
// backoff, an unsubscribe sent again at once; with KeepExpired the keys stay
// asked for the adapter to drop the connection.
func TestSubsFlushExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := venue.Subs{Track: true, Deadline: 10 * time.Second}
		s.Want("a", "b")
		s.Flush(time.Now(), nil)
		s.Ack("b")
		s.Unwant("b")
		if got := planned(s.Flush(time.Now(), nil)); !slices.Equal(got, []string{"unsubscribe b"}) {
			t.Fatalf("plan %v", got)
		}
		time.Sleep(10*time.Second + time.Millisecond)
		if got := planned(s.Flush(time.Now(), nil)); !slices.Equal(got, []string{"unsubscribe b"}) {
			t.Fatalf("at the deadline %v, want the unsubscribe sent again and a waiting its backoff", got)
		}
		if s.State("a") != venue.SubNone {
			t.Fatalf("expired a is %v", s.State("a"))
		}
		time.Sleep(time.Second)
		if got := planned(s.Flush(time.Now(), nil)); !slices.Equal(got, []string{"subscribe a"}) {
			t.Fatalf("after the backoff %v", got)
		}

		k := venue.Subs{Deadline: time.Second, KeepExpired: true}
		k.Want("x")
		k.Flush(time.Now(), nil)
		time.Sleep(2 * time.Second)
		if rs := k.Flush(time.Now(), nil); rs != nil || !slices.Equal(k.Overdue(time.Now()), []string{"x"}) {
			t.Fatalf("KeepExpired: plan %v, overdue %v", planned(rs), k.Overdue(time.Now()))
		}
	})
}

// NextID takes an id from the requests' sequence without recording a
// request, so a ping and a subscribe never share one.
func TestSubsNextID(t *testing.T) {
	s := venue.Subs{Track: true}
	s.Want("a")
	if id := s.NextID(); id != 1 {
		t.Fatalf("first id %d, want 1", id)
	}
	rs := s.Flush(time.Now(), nil)
	if len(rs) != 1 || rs[0].ID != 2 {
		t.Fatalf("plan %+v, want one request with id 2", rs)
	}
	if out := s.Out(); !slices.Equal(out, []int64{2}) {
		t.Fatalf("out %v, want [2]: NextID records nothing", out)
	}
}

// BenchmarkSubsFlush is a connection's first plan: 1,024 symbols on three
// channels, batched within 4 KiB requests and tracked by id.
func BenchmarkSubsFlush(b *testing.B) {
	keys := make([]string, 0, 3*1024)
	for i := range 1024 {
		for _, ch := range []string{"@depth@100ms", "@trade", "@bookTicker"} {
			keys = append(keys, "sym"+strconv.Itoa(i)+"usdt"+ch)
		}
	}
	s := venue.Subs{Track: true, Limits: venue.SubLimits{MaxBytes: 4096, Overhead: 64, KeyOverhead: 3}}
	s.WantOnly(keys...)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		s.Reset()
		if rs := s.Flush(now, nil); len(rs) == 0 {
			b.Fatal("no plan")
		}
	}
}
