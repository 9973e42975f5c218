package venue

import "sync"

// SymbolChecker is implemented by an adapter that knows its venue's
// instrument list; the daemon refuses a subscription to a symbol the list
// does not have (unknown_symbol) rather than asking the venue for it.
type SymbolChecker interface {
	// KnownSymbol reports whether sym is one of the venue's instruments.
	// listed is false while the adapter has no list yet; the daemon then
	// accepts any well-formed symbol.
	KnownSymbol(sym string) (known, listed bool)
}

// Instruments is what an adapter knows of its venue's instruments, and
// its KnownSymbol: the venue's whole list when it publishes one (SetList),
// and the symbols the venue confirmed or refused one by one (Confirm,
// Refuse). The venue's answer about one symbol outranks the list, which
// may be older. The zero value knows nothing. Safe for concurrent use;
// its mutex is a leaf.
type Instruments struct {
	mu   sync.Mutex
	list map[string]bool // the venue's list; nil: none
	one  map[string]bool // answers about one symbol: confirmed (true) or refused (false)
}

var _ SymbolChecker = (*Instruments)(nil)

// SetList makes syms the venue's instrument list, replacing any before;
// nil means no list.
func (in *Instruments) SetList(syms []string) {
	var list map[string]bool
	if syms != nil {
		list = make(map[string]bool, len(syms))
		for _, s := range syms {
			list[s] = true
		}
	}
	in.mu.Lock()
	in.list = list
	in.mu.Unlock()
}

// Confirm records that the venue has sym.
func (in *Instruments) Confirm(sym string) { in.answer(sym, true) }

// Refuse records that the venue refused sym as not one of its
// instruments.
func (in *Instruments) Refuse(sym string) { in.answer(sym, false) }

func (in *Instruments) answer(sym string, ok bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.one == nil {
		in.one = map[string]bool{}
	}
	in.one[sym] = ok
}

// Forget drops what the venue answered about syms one by one (a
// subscription asks the venue again); the list stays.
func (in *Instruments) Forget(syms ...string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, s := range syms {
		delete(in.one, s)
	}
}

// KnownSymbol is the venue's answer about sym if it gave one, else sym's
// presence in the list; listed is false when there is neither.
func (in *Instruments) KnownSymbol(sym string) (known, listed bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if ok, answered := in.one[sym]; answered {
		return ok, true
	}
	if in.list == nil {
		return false, false
	}
	return in.list[sym], true
}
