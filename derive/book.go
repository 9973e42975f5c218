package derive

import "github.com/fanoutd/fanoutd/venue"

// touches reports whether the update ev, applied to book, may have changed
// the top depth levels: some level it names is at or better than the
// depth-th level now (a removed level that was in the top leaves a worse
// one in its place), or a side holds depth levels or fewer.
func touches(ev *venue.Event, book *venue.Book, depth int) bool {
	if ev.HasFixed() {
		return touchesFixed(ev, book, depth)
	}
	for _, s := range [2]venue.BookSide{venue.Bid, venue.Ask} {
		ls := ev.Bids
		if s == venue.Ask {
			ls = ev.Asks
		}
		if len(ls) == 0 {
			continue
		}
		n := book.Len(s)
		if n <= depth {
			return true
		}
		edge := book.Level(s, depth-1).Price
		for i := range ls {
			c := ls[i].Price.Cmp(edge)
			if s == venue.Bid && c >= 0 || s == venue.Ask && c <= 0 {
				return true
			}
		}
	}
	return false
}

// touchesFixed is touches for an event with its levels in fixed point.
func touchesFixed(ev *venue.Event, book *venue.Book, depth int) bool {
	for _, s := range [2]venue.BookSide{venue.Bid, venue.Ask} {
		ls := ev.FixedBids
		if s == venue.Ask {
			ls = ev.FixedAsks
		}
		if len(ls) == 0 {
			continue
		}
		n := book.Len(s)
		if n <= depth {
			return true
		}
		edge, ok := book.LevelFixed(s, depth-1)
		for i := range ls {
			var c int
			if ok {
				c = ls[i].Price.Cmp(edge.Price)
			} else {
				c = ls[i].Price.Decimal().Cmp(book.Level(s, depth-1).Price)
			}
			if s == venue.Bid && c >= 0 || s == venue.Ask && c <= 0 {
				return true
			}
		}
	}
	return false
}
