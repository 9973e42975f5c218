package venue_test

import (
	"testing"

	"github.com/fanoutd/fanoutd/venue"
)

// KnownSymbol: nothing known is unlisted; the list answers for what the
// venue did not answer one by one; a confirmation or refusal outranks the
// list until forgotten; a nil list is none.
func TestInstrumentsKnownSymbol(t *testing.T) {
	var in venue.Instruments
	check := func(sym string, known, listed bool) {
		t.Helper()
		if k, l := in.KnownSymbol(sym); k != known || l != listed {
			t.Errorf("%s: known %v listed %v, want %v %v", sym, k, l, known, listed)
		}
	}
	check("A", false, false)
	in.Refuse("A")
	check("A", false, true)
	check("B", false, false)
	in.SetList([]string{"A", "B"})
	check("A", false, true) // refused, though listed
	check("B", true, true)
	check("C", false, true)
	in.Confirm("C")
	check("C", true, true)
	in.Forget("A", "C")
	check("A", true, true)
	check("C", false, true)
	in.SetList(nil)
	check("B", false, false)
	in.SetList([]string{})
	check("B", false, true)
}
