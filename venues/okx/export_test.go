package okx

import "github.com/fanoutd/fanoutd/venue"

// ResetCache empties the decoder's decimal cache, so a benchmark that
// loops over a short capture does not find every text cached from the
// previous pass.
func (d *Decoder) ResetCache() { *d.cache = venue.DecimalCache{} }
