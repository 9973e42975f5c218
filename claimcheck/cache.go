package claimcheck

import (
	"container/list"
	"sync"
)

// cache is a byte-bounded LRU of immutable values: claim bytes, ranges,
// indexes and manifests. Packs never change once written, so entries never
// go stale; they only age out.
//
// A hand-rolled LRU rather than otter or ristretto: its bound is exact,
// Put is synchronous (a fill is visible to the next Get, which the
// "late result lands in the cache" guarantee relies on) and it never
// rejects a new entry by admission policy.
type cache struct {
	max int64

	mu    sync.Mutex // protects the fields below
	bytes int64
	ll    *list.List // front = most recently used
	m     map[Key]*list.Element
}

type cacheEntry struct {
	key  Key
	val  any
	size int64
}

// entryOverhead is charged per entry on top of its value's size.
const entryOverhead = 128

func newCache(max int64) *cache {
	return &cache{max: max, ll: list.New(), m: make(map[Key]*list.Element)}
}

func (c *cache) get(k Key) (any, bool) {
	if c.max <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*cacheEntry).val, true
}

// put stores val and reports whether it did; a value bigger than the
// whole cache is not stored.
func (c *cache) put(k Key, val any, size int64) bool {
	size += entryOverhead
	if c.max <= 0 || size > c.max {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		c.ll.MoveToFront(e)
		return true
	}
	c.m[k] = c.ll.PushFront(&cacheEntry{k, val, size})
	c.bytes += size
	for c.bytes > c.max {
		e := c.ll.Back()
		ce := e.Value.(*cacheEntry)
		c.ll.Remove(e)
		delete(c.m, ce.key)
		c.bytes -= ce.size
	}
	return true
}

func (c *cache) stats() (bytes int64, entries int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, len(c.m)
}
