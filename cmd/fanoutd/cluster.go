package main

import (
	"flag"
	"fmt"

	"github.com/fanoutd/fanoutd/internal/config"
)

// clusterFlagValues are the flags that override the cluster: section.
type clusterFlagValues struct {
	role     *string
	nats     *string
	embedded *bool
}

// clusterFlags declares --role, --nats and --embedded-nats on fs.
func clusterFlags(fs *flag.FlagSet) *clusterFlagValues {
	return &clusterFlagValues{
		role:     fs.String("role", "", "node role: all (one process, the default), ingest or edge; overrides cluster.role"),
		nats:     fs.String("nats", "", "NATS server URLs, comma-separated (default nats://127.0.0.1:4222); overrides cluster.nats_url and FANOUTD_NATS_URL"),
		embedded: fs.Bool("embedded-nats", false, "run the NATS server (JetStream on) inside this ingest node, on --nats's address"),
	}
}

// apply writes the flags that were set into cfg and validates the result.
func (c *clusterFlagValues) apply(fs *flag.FlagSet, cfg *config.Config) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "role":
			switch *c.role {
			case config.RoleAll, config.RoleIngest, config.RoleEdge:
				cfg.Cluster.Role = *c.role
			default:
				err = &config.Error{Key: "--role", Msg: fmt.Sprintf("%q is not all, ingest or edge", *c.role)}
			}
		case "nats":
			cfg.Cluster.NATSURL = *c.nats
		case "embedded-nats":
			cfg.Cluster.EmbeddedNATS = *c.embedded
		}
	})
	if err != nil {
		return err
	}
	return cfg.CheckCluster()
}
