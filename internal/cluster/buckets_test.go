package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/testutil"
)

// jsReady connects to url and waits until JetStream answers (a new
// cluster elects its meta leader first).
func jsReady(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "JetStream", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return nc, js
}

func streamReplicas(t *testing.T, js jetstream.JetStream, bucket string) int {
	t.Helper()
	s, err := js.Stream(context.Background(), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().Config.Replicas
}

// TestBucketReplicasAuto: with kv_replicas auto a bucket has one copy on
// a lone server and three on a three-server JetStream cluster, where an
// existing one-copy bucket is raised to three; an explicit count is
// applied as given.
func TestBucketReplicasAuto(t *testing.T) {
	ctx := context.Background()
	t.Run("single", func(t *testing.T) {
		_, js := jsReady(t, natstest.Run(t).ClientURL())
		_, n, err := ensureBucket(ctx, js, jetstream.KeyValueConfig{Bucket: "b", History: 1}, 0)
		if err != nil || n != 1 || streamReplicas(t, js, "b") != 1 {
			t.Fatalf("lone server: replicas %d, err %v; want 1", n, err)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		servers := natstest.Cluster(t, 3, "")
		_, js := jsReady(t, natstest.URLs(servers))
		var err error
		testutil.WaitFor(t, 30*time.Second, "a one-copy bucket", func() bool {
			_, _, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{Bucket: "b", History: 1}, 1)
			return err == nil
		})
		if r := streamReplicas(t, js, "b"); r != 1 {
			t.Fatalf("explicit 1: stream has %d replicas", r)
		}
		_, n, err := ensureBucket(ctx, js, jetstream.KeyValueConfig{Bucket: "b", History: 1}, 0)
		if err != nil || n != 3 || streamReplicas(t, js, "b") != 3 {
			t.Fatalf("auto on three servers: replicas %d, err %v; want the existing bucket raised to 3", n, err)
		}
		_, n, err = ensureBucket(ctx, js, jetstream.KeyValueConfig{Bucket: "c", History: 1}, 2)
		if err != nil || n != 2 || streamReplicas(t, js, "c") != 2 {
			t.Fatalf("explicit 2: replicas %d, err %v", n, err)
		}
	})
}
