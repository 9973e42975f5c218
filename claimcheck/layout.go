package claimcheck

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"time"
)

// PackKey returns the object key of a pack:
//
//	flat:    claims/tenant=<t>/dt=<YYYY-MM-DD>/<pack>.zip
//	sharded: <hhhh>/claims/tenant=<t>/dt=<YYYY-MM-DD>/<pack>.zip
//
// where hhhh is the first 4 hex digits of sha256("<t>/<pack>").
func PackKey(l Layout, tenant string, day uint16, pack PackID) string {
	dt := time.Unix(int64(day)*86400, 0).UTC().Format(time.DateOnly)
	k := "claims/tenant=" + tenant + "/dt=" + dt + "/" + pack.String() + ".zip"
	if l == LayoutSharded {
		s := sha256.Sum256([]byte(tenant + "/" + pack.String()))
		k = fmt.Sprintf("%02x%02x/", s[0], s[1]) + k
	}
	return k
}

// HomeStore returns the index, among names, of the home store of a pack:
// the store with the highest FNV-1a hash of (name, tenant, pack)
// (rendezvous hashing). It is stable for a given set of names whatever
// their order, and adding a store moves only the packs that the new store
// wins. It returns 0 for a single store.
func HomeStore(names []string, tenant string, pack PackID) int {
	best, bestH := 0, uint64(0)
	for i, n := range names {
		h := fnv.New64a()
		var l [4]byte
		for _, s := range []string{n, tenant} {
			binary.LittleEndian.PutUint32(l[:], uint32(len(s)))
			h.Write(l[:])
			h.Write([]byte(s))
		}
		h.Write(pack[:])
		if v := h.Sum64(); i == 0 || v > bestH {
			best, bestH = i, v
		}
	}
	return best
}

// searchOrder returns the stores to search for a pack: home first, then
// the others in configuration order.
func searchOrder(n, home int) []int {
	o := make([]int, 0, n)
	o = append(o, home)
	for i := 0; i < n; i++ {
		if i != home {
			o = append(o, i)
		}
	}
	return o
}
