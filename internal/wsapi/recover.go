package wsapi

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/subscriber"
)

// recover answers a recover op: the reply, then the events asked for, or
// an error reply.
func (s *session) recover(cmd Command) {
	st := cmd.Streams[0]
	if !s.check(cmd.ID, st) {
		return
	}
	if _, ok := slices.BinarySearch(s.sub.Streams(), st); !ok {
		s.refuse(cmd.ID, api.CodeNotSubscribed, "not subscribed to "+string(st))
		return
	}
	r, err := s.srv.o.Hub.Recover(s.sub, st, cmd.From, func(r fanout.Recovered) *subscriber.Message {
		return &subscriber.Message{Data: appendRecover(nil, cmd.ID, st, r.From, r.To), Reply: true}
	})
	switch {
	case err == nil:
	case errors.Is(err, fanout.ErrNotRecoverable):
		s.refuse(cmd.ID, api.CodeNotRecoverable, fmt.Sprintf("%s: seq %d is not in the recovery window; oldest seq held: %d", st, cmd.From, r.Oldest))
	case errors.Is(err, fanout.ErrNoRoom):
		s.refuse(cmd.ID, api.CodeNotRecoverable, fmt.Sprintf("%s: seqs %d to %d are more than the queue has room for now; oldest seq held: %d", st, r.From, r.To, r.Oldest))
	default:
		s.refuse(cmd.ID, api.CodeNotSubscribed, "not subscribed to "+string(st))
	}
}
