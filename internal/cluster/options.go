package cluster

import "strings"

// Options is how a node reaches the bus and what it is there: the
// daemon maps the configuration's cluster: section to it. Its secrets
// (Password, Token, EdgeToken, the creds file) are never logged.
type Options struct {
	// Role is "all", RoleIngest or RoleEdge.
	Role string
	// NATSURL is the NATS servers, comma-separated (each nats:// or
	// tls://, host:port): Connect dials one and fails over to the others
	// and to those the cluster announces.
	NATSURL string
	// SubjectPrefix starts every subject the node uses.
	SubjectPrefix string
	// Node names this node on the bus (client name, heartbeats).
	Node string
	// EmbeddedNATS: an ingest runs the NATS server (StartServer) in its
	// own process, listening on NATSURL's address.
	EmbeddedNATS bool
	// NATSDir is where the embedded server's JetStream stores, and where
	// EmbeddedCredentials keeps the secrets it generates.
	NATSDir string
	// Credentials: at most one of user+password, token, creds file.
	User, Password, Token, Creds string
	// EdgeToken is the secret edges log in to the embedded server with.
	EdgeToken string
	// KVReplicas is how many copies JetStream keeps of the lease and
	// names buckets, 1 to 5; 0 is 3 where the cluster can place three,
	// else 1.
	KVReplicas int
	// TLS: a CA to verify the server, and a client certificate and key.
	TLSCA, TLSCert, TLSKey string
}

// URLs returns the servers of NATSURL, each trimmed of spaces, empty ones
// left out.
func (o Options) URLs() []string {
	var out []string
	for _, u := range strings.Split(o.NATSURL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}
