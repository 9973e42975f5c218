// Package notice defines the Notice: how fanoutd tells a subscriber, out of
// band of the data, that something about its data changed.
//
// # What a notice is
//
// A Notice has a Kind from a closed set (link_up, link_down,
// link_reconnecting, book_resync, dropping, resumed, coverage_change,
// refusal, data_quality, rate_limited, shutdown, replay_end, recording_failed), a Severity
// (info, warning, error; each kind has a default), the venue it concerns, an
// optional stream, the time it was raised, a human message and structured
// details. New refuses an unknown kind and refuses details that carry a
// credential-shaped key (api_key, secret, password, token, …, compared
// case-insensitively, at any depth): a notice is shown to subscribers and
// logged, so it must never carry a secret.
//
// # Wire form
//
// AppendJSON writes the stable wire form, one JSON object:
//
//	{"type":"notice","kind":"dropping","severity":"warning","venue":"coinbase","stream":"","at":"2026-11-30T05:00:00.123Z","message":"…","details":{"bound":10000,"queue_len":10000}}
//
// Keys appear in that order; details keys are sorted. Clients and the relay
// between nodes depend on this form; it changes only on purpose.
//
// # Delivery
//
// Notices travel on each subscriber's own unbounded notice queue, which is
// drained ahead of data and never dropped (package subscriber). They are
// low-volume by construction: one per transition, never one per message.
package notice
