package notice

import (
	"strings"
	"testing"
	"time"
)

func TestEveryKindHasASchema(t *testing.T) {
	for _, k := range Kinds() {
		if _, ok := schemas[k]; !ok {
			t.Errorf("%s has no details schema", k)
		}
	}
}

func TestCheckDetails(t *testing.T) {
	at := time.Unix(0, 0)
	for _, c := range []struct {
		kind    Kind
		details map[string]any
		err     string // "" for valid
	}{
		{CoverageChange, map[string]any{"stream": "x:level2:Y", "live": true}, ""},
		{CoverageChange, map[string]any{"added": "x:level2:Y"}, `coverage_change: details key "stream" is required`},
		{CoverageChange, map[string]any{"stream": "x:level2:Y", "live": "yes"}, `"live" is string, want boolean`},
		{LinkDown, map[string]any{"error": "eof"}, `link_down: details key "reason" is required`},
		{LinkDown, map[string]any{"reason": "eof", "error": "eof"}, `"error" is not in the schema`},
		{BookResync, map[string]any{"reason": "gap", "last_u": int64(5)}, ""},
		{BookResync, map[string]any{"reason": "gap", "levels": []string{"a"}}, `evidence key "levels"`},
		{Shutdown, nil, ""},
		{Resumed, map[string]any{"reason": "drained", "bound": 10, "queue_len": 4, "max_queue_bytes": 0,
			"dropped": uint64(3), "gaps": map[string]any{}}, ""},
	} {
		err := CheckDetails(Must(c.kind, "x", "", at, "", c.details))
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s %v: %v, want %q", c.kind, c.details, err, c.err)
		}
	}
}
