package cluster

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
)

// AutoReplicas is the replica count a bucket gets where cluster.kv_replicas
// is 0 (auto) and JetStream has the servers for it.
const AutoReplicas = 3

// JetStream's answers when a stream cannot have the replicas asked for:
// not clustered, or too few servers.
const (
	jsErrReplicasNotSupported  = 10074
	jsErrInsufficientResources = 10023
	jsErrNoSuitablePeers       = 10005
)

// ensureBucket creates cfg's bucket, or updates it, with replicas copies
// (0: AutoReplicas where the JetStream cluster can place them, else 1). An
// existing bucket gets the new count too (its stream's Replicas is
// updated), except that auto never lowers what a bucket has: a cluster
// with a server down cannot place 3, and its bucket keeps its copies. It
// returns the bucket and its replica count.
func ensureBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, replicas int) (jetstream.KeyValue, int, error) {
	auto := replicas <= 0
	cfg.Replicas = replicas
	if auto {
		cfg.Replicas = AutoReplicas
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if err == nil || !auto || !tooFewServers(err) {
		return kv, cfg.Replicas, err
	}
	if kv, err := js.KeyValue(ctx, cfg.Bucket); err == nil {
		if st, err := kv.Status(ctx); err == nil {
			if r := bucketReplicas(st); r > 1 {
				return kv, r, nil
			}
		}
	}
	cfg.Replicas = 1
	kv, err = js.CreateOrUpdateKeyValue(ctx, cfg)
	return kv, 1, err
}

func tooFewServers(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case jsErrReplicasNotSupported, jsErrInsufficientResources, jsErrNoSuitablePeers:
		return true
	}
	return false
}

func bucketReplicas(st jetstream.KeyValueStatus) int {
	if s, ok := st.(*jetstream.KeyValueBucketStatus); ok && s.StreamInfo() != nil {
		return s.StreamInfo().Config.Replicas
	}
	return 0
}

// logReplicas says how many copies bucket has and why.
func logReplicas(log *slog.Logger, bucket string, want, got int) {
	switch {
	case want > 0:
		log.Info("nats: key-value bucket replicated as configured (cluster.kv_replicas)", "bucket", bucket, "replicas", got)
	case got >= AutoReplicas:
		log.Info("nats: key-value bucket replicated (cluster.kv_replicas auto: the JetStream cluster has at least three servers)", "bucket", bucket, "replicas", got)
	case got > 1:
		log.Warn("nats: key-value bucket keeps its replicas (cluster.kv_replicas auto: too few servers up to place three now)", "bucket", bucket, "replicas", got)
	default:
		log.Warn("nats: key-value bucket not replicated (cluster.kv_replicas auto: JetStream is not a cluster of at least three servers); losing its server loses leadership and names until it returns", "bucket", bucket, "replicas", got)
	}
}
