package venue

// SymbolChecker is implemented by an adapter that knows its venue's
// instrument list; the daemon refuses a subscription to a symbol the list
// does not have (unknown_symbol) rather than asking the venue for it.
type SymbolChecker interface {
	// KnownSymbol reports whether sym is one of the venue's instruments.
	// listed is false while the adapter has no list yet; the daemon then
	// accepts any well-formed symbol.
	KnownSymbol(sym string) (known, listed bool)
}
