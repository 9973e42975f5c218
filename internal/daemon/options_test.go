package daemon

import (
	"reflect"
	"testing"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/wsapi"
)

// TestConfigDefaultsArePackageDefaults: the configuration's defaults,
// mapped to the packages' options, are what those packages take for a
// zero field, so the documented defaults (generated from config's) are the
// ones a package used as a library has too.
func TestConfigDefaultsArePackageDefaults(t *testing.T) {
	cfg, err := config.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := wsOptions(cfg)
	got.SendBuffer = cfg.Websocket.SendBufferBytes // 0 maps to -1 (the kernel's); the default is not 0
	want := wsapi.Options{}.WithDefaults()
	// Not a zero field's default: the daemon runs the write pool, on io_uring.
	want.WriteDelay, want.Uring = wsapi.DefaultWriteDelay, true
	got.Logger, want.Logger = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("websocket and limits defaults\n got %+v\nwant %+v", got, want)
	}
	if d, want := derivedLimits(cfg), (fanout.DerivedLimits{PerToken: fanout.DefaultMaxDerivedPerToken, PerSource: fanout.DefaultMaxDerivedPerSource, Weight: fanout.DefaultMaxDerivedWeight}); d != want {
		t.Errorf("derived limits %+v, want %+v", d, want)
	}
	if r, want := recoveryOptions(cfg), (fanout.RecoveryOptions{MaxEventsPerStream: fanout.DefaultRecoveryEvents, MaxBytes: fanout.DefaultRecoveryBytes, MaxAge: fanout.DefaultRecoveryAge}); r != want {
		t.Errorf("recovery %+v, want %+v", r, want)
	}
	for _, v := range cfg.Venues {
		if v.MaxQueueLen != fanout.DefaultMaxQueueLen {
			t.Errorf("venues.%s.max_queue_len %d, want fanout's %d", v.Name, v.MaxQueueLen, fanout.DefaultMaxQueueLen)
		}
	}
}

// TestWSOptionsMapping: every websocket and limits key reaches its option,
// send_buffer_bytes 0 the kernel's default and named_ttl never a negative
// TTL.
func TestWSOptionsMapping(t *testing.T) {
	cfg, err := config.Parse([]byte(`
origins: ["https://a.example"]
websocket: {write_timeout: 3s, ping_interval: 4s, write_delay: 0s, io_uring: false, named_ttl: never, send_buffer_bytes: 0, max_batch_bytes: 1024, max_batch_messages: 9}
limits: {max_streams_per_connection: 5, max_message_bytes: 100, max_connections_per_token: 6, commands_per_second: 2.5, command_burst: 7, max_reply_bytes: 2048, max_named_per_token: 8, max_named: 10}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	o := wsOptions(cfg)
	want := wsapi.Options{Origins: []string{"https://a.example"}, WriteTimeout: 3e9, PingInterval: 4e9, NamedTTL: -1, SendBuffer: -1,
		MaxBatchBytes: 1024, MaxBatchMessages: 9, ExpiringNotice: cfg.ExpiringNotice,
		Limits: wsapi.Limits{MaxStreams: 5, MaxMessageBytes: 100, MaxConnsPerToken: 6, CommandsPerSecond: 2.5, CommandBurst: 7, MaxReplyBytes: 2048, MaxNamedPerToken: 8, MaxNamed: 10}}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("\n got %+v\nwant %+v", o, want)
	}
}
