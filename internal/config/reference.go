package config

import (
	"strconv"
	"strings"
	"time"
)

// defaultCells returns, for every key whose default is a value, that
// default as the reference's default column writes it: read from the
// configuration an empty document resolves to, so the reference
// (docs/configuration.md, docs/cluster.md) is generated from the defaults
// in code (TestConfigReferenceInDocs). A key left out has a default that
// is not one value (the host name, the adapter's, the venue's endpoint).
func defaultCells() map[string]string {
	c, err := Parse(nil, func(string) string { return "" })
	if err != nil {
		panic("config: the defaults do not resolve: " + err.Error())
	}
	v := c.Venues[0]
	channels := make([]string, len(v.Channels))
	for i, ch := range v.Channels {
		channels[i] = string(ch)
	}
	w, l := c.Websocket, c.Limits
	out := map[string]string{}
	for key, val := range map[string]any{
		"listen":                            c.Listen,
		"log_level":                         c.LogLevel,
		"shutdown_timeout":                  c.ShutdownTimeout,
		"origins":                           c.Origins,
		"http.read_header_timeout":          c.HTTP.ReadHeaderTimeout,
		"http.idle_timeout":                 c.HTTP.IdleTimeout,
		"http.max_anonymous_connections":    c.HTTP.MaxAnonymousConnections,
		"auth.jwt.expiring_notice":          c.ExpiringNotice,
		"websocket.write_timeout":           w.WriteTimeout,
		"websocket.ping_interval":           w.PingInterval,
		"websocket.write_delay":             w.WriteDelay,
		"websocket.io_uring":                w.IOUring,
		"websocket.named_ttl":               w.NamedTTL,
		"websocket.send_buffer_bytes":       w.SendBufferBytes,
		"websocket.max_batch_bytes":         w.MaxBatchBytes,
		"websocket.max_batch_messages":      w.MaxBatchMessages,
		"limits.max_streams_per_connection": l.MaxStreamsPerConnection,
		"limits.max_message_bytes":          l.MaxMessageBytes,
		"limits.max_connections_per_token":  l.MaxConnectionsPerToken,
		"limits.commands_per_second":        l.CommandsPerSecond,
		"limits.command_burst":              l.CommandBurst,
		"limits.max_reply_bytes":            l.MaxReplyBytes,
		"limits.max_named_per_token":        l.MaxNamedPerToken,
		"limits.max_named":                  l.MaxNamed,
		"limits.max_derived_per_token":      l.MaxDerivedPerToken,
		"limits.max_derived_per_source":     l.MaxDerivedPerSource,
		"limits.max_derived_weight":         l.MaxDerivedWeight,
		"venues.<name>.enabled":             true, // an enabled venue is one resolved
		"venues.<name>.channels":            channels,
		"venues.<name>.max_symbols":         v.MaxSymbols,
		"venues.<name>.unsubscribe_after":   v.UnsubscribeAfter,
		"venues.<name>.max_queue_len":       v.MaxQueueLen,
		"venues.<name>.max_queue_bytes":     v.MaxQueueBytes,
		"recovery.max_events_per_stream":    c.Recovery.MaxEventsPerStream,
		"recovery.max_bytes":                c.Recovery.MaxBytes,
		"recovery.max_age":                  c.Recovery.MaxAge,
		"record.enabled":                    c.Record.Enabled,
		"record.dir":                        c.Record.Dir,
		"record.max_bytes":                  c.Record.MaxBytes,
		"record.max_age":                    c.Record.MaxAge,
		"record.queue":                      c.Record.Queue,
		"record.check_in":                   c.Record.CheckIn,
		"history.max_range":                 c.History.MaxRange,
		"history.max_queries":               c.History.MaxQueries,
		"cluster.role":                      c.Cluster.Role,
		"cluster.nats_url":                  c.Cluster.NATSURL,
		"cluster.subject_prefix":            c.Cluster.SubjectPrefix,
		"cluster.embedded_nats":             c.Cluster.EmbeddedNATS,
		"cluster.nats_dir":                  c.Cluster.NATSDir,
	} {
		out[key] = cell(key, val)
	}
	return out
}

// cell writes a default as the reference does: in backquotes, a duration
// in its shortest form (2m, 24h), a list as [a, b], and a byte count of
// whole MiB with its size beside it.
func cell(key string, v any) string {
	var s string
	switch x := v.(type) {
	case time.Duration:
		s = shortDuration(x)
	case []string:
		s = "[" + strings.Join(x, ", ") + "]"
	case int:
		s = strconv.Itoa(x)
		if strings.HasSuffix(key, "bytes") && x >= 1<<20 && x%(1<<20) == 0 {
			return "`" + s + "` (" + strconv.Itoa(x>>20) + " MiB)"
		}
	case int64:
		return cell(key, int(x))
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		s = strconv.FormatBool(x)
	case string:
		s = x
	default:
		panic("config: no cell for a default of type " + strconv.Quote(key))
	}
	return "`" + s + "`"
}

// shortDuration is d without its zero trailing units: 2m, 24h, 1h30m, 3ms.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
