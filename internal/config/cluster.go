package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// Roles of a node (cluster.role).
const (
	RoleAll    = "all"    // one process: venues, books, subscribers (the default)
	RoleIngest = "ingest" // venues and books; publishes to NATS; no subscribers
	RoleEdge   = "edge"   // subscribers only; takes its events from NATS
)

// Cluster defaults.
const (
	DefaultNATSURL       = "nats://127.0.0.1:4222"
	DefaultSubjectPrefix = "fanoutd"
	defaultNATSDir       = "./data/nats"
)

// clusterConfig is the cluster: section as written.
type clusterConfig struct {
	Role          string        `yaml:"role"`
	NATSURL       string        `yaml:"nats_url"`
	SubjectPrefix string        `yaml:"subject_prefix"`
	Node          string        `yaml:"node"`
	EmbeddedNATS  *bool         `yaml:"embedded_nats"`
	NATSDir       string        `yaml:"nats_dir"`
	User          string        `yaml:"user"`
	Password      string        `yaml:"password"`
	Token         string        `yaml:"token"`
	Creds         string        `yaml:"creds"`
	EdgeToken     string        `yaml:"edge_token"`
	TLS           clusterTLSRaw `yaml:"tls"`
}

type clusterTLSRaw struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Cluster is the resolved cluster: section: the node's role and how it
// reaches NATS. Its secrets (Password, Token, the creds file's content)
// are never logged: String prints none of them.
type Cluster struct {
	// Role is RoleAll (the default), RoleIngest or RoleEdge.
	Role string
	// NATSURL is the NATS server (nats:// or tls://, host:port). Defaults
	// to nats://127.0.0.1:4222. FANOUTD_NATS_URL and --nats override it.
	NATSURL string
	// SubjectPrefix starts every subject the node uses. Defaults to
	// "fanoutd".
	SubjectPrefix string
	// Node names this node on the bus (heartbeats). Defaults to the host
	// name.
	Node string
	// EmbeddedNATS: an ingest runs the NATS server (with JetStream) in its
	// own process, listening on NATSURL's address. Defaults to false.
	EmbeddedNATS bool
	// NATSDir is where the embedded server's JetStream stores. Defaults to
	// ./data/nats.
	NATSDir string
	// Credentials: at most one of user+password, token, creds file.
	// FANOUTD_NATS_USER, FANOUTD_NATS_PASSWORD, FANOUTD_NATS_TOKEN and
	// FANOUTD_NATS_CREDS override the file.
	User, Password, Token, Creds string
	// EdgeToken is the secret edges connect to the embedded server with
	// (as a token, or as user "edge" with it as the password); this node's
	// own credentials are the ingests'. Used only with EmbeddedNATS;
	// generated into NATSDir if empty. FANOUTD_NATS_EDGE_TOKEN overrides.
	EdgeToken string
	// TLS: a CA to verify the server, and a client certificate and key
	// (both or neither). FANOUTD_NATS_TLS_CA, _CERT, _KEY override.
	TLSCA, TLSCert, TLSKey string
}

// String describes c without its secrets.
func (c Cluster) String() string {
	auth := "none"
	switch {
	case c.Creds != "":
		auth = "creds"
	case c.Token != "":
		auth = "token"
	case c.User != "":
		auth = "user " + c.User
	}
	return fmt.Sprintf("role=%s nats=%s prefix=%s node=%s embedded=%v auth=%s", c.Role, c.NATSURL, c.SubjectPrefix, c.Node, c.EmbeddedNATS, auth)
}

// Clustered reports whether the node talks to NATS (a role other than all).
func (c Cluster) Clustered() bool { return c.Role == RoleIngest || c.Role == RoleEdge }

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

func resolveCluster(cc *clusterConfig, getenv func(string) string) (Cluster, error) {
	c := Cluster{Role: RoleAll, NATSURL: DefaultNATSURL, SubjectPrefix: DefaultSubjectPrefix, NATSDir: defaultNATSDir,
		User: cc.User, Password: cc.Password, Token: cc.Token, Creds: cc.Creds, EdgeToken: cc.EdgeToken,
		TLSCA: cc.TLS.CA, TLSCert: cc.TLS.Cert, TLSKey: cc.TLS.Key}
	switch cc.Role {
	case "":
	case RoleAll, RoleIngest, RoleEdge:
		c.Role = cc.Role
	default:
		return c, cfgErr("cluster.role", "%q is not all, ingest or edge", cc.Role)
	}
	if cc.NATSURL != "" {
		c.NATSURL = cc.NATSURL
	}
	for _, e := range []struct {
		env string
		dst *string
	}{
		{"FANOUTD_NATS_URL", &c.NATSURL}, {"FANOUTD_NATS_USER", &c.User}, {"FANOUTD_NATS_PASSWORD", &c.Password},
		{"FANOUTD_NATS_TOKEN", &c.Token}, {"FANOUTD_NATS_CREDS", &c.Creds}, {"FANOUTD_NATS_EDGE_TOKEN", &c.EdgeToken},
		{"FANOUTD_NATS_TLS_CA", &c.TLSCA}, {"FANOUTD_NATS_TLS_CERT", &c.TLSCert}, {"FANOUTD_NATS_TLS_KEY", &c.TLSKey},
	} {
		if v := getenv(e.env); v != "" {
			*e.dst = v
		}
	}
	if err := CheckNATSURL(c.NATSURL); err != nil {
		return c, err
	}
	if cc.SubjectPrefix != "" {
		if len(cc.SubjectPrefix) > 64 || !prefixRE.MatchString(cc.SubjectPrefix) {
			return c, cfgErr("cluster.subject_prefix", "%q is not dot-separated tokens of A-Z a-z 0-9 _ - (at most 64 bytes)", cc.SubjectPrefix)
		}
		c.SubjectPrefix = cc.SubjectPrefix
	}
	c.Node = cc.Node
	if c.Node == "" {
		c.Node, _ = os.Hostname()
		if c.Node == "" {
			c.Node = "fanoutd"
		}
	} else if len(c.Node) > 128 || strings.ContainsFunc(c.Node, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return c, cfgErr("cluster.node", "%q is not a name of at most 128 bytes without spaces", c.Node)
	}
	if cc.EmbeddedNATS != nil {
		c.EmbeddedNATS = *cc.EmbeddedNATS
	}
	if cc.NATSDir != "" {
		c.NATSDir = cc.NATSDir
	}
	// Secrets are never echoed: the messages name the keys only.
	n := 0
	if c.User != "" || c.Password != "" {
		if c.User == "" || c.Password == "" {
			return c, cfgErr("cluster.user", "user and password go together (set both, or neither)")
		}
		n++
	}
	if c.Token != "" {
		n++
	}
	if c.Creds != "" {
		n++
	}
	if n > 1 {
		return c, cfgErr("cluster", "set one of user+password, token or creds, not several")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return c, cfgErr("cluster.tls", "cert and key go together (set both, or neither)")
	}
	return c, nil
}

// CheckNATSURL validates a NATS server URL: nats:// or tls://, host:port,
// no user information (credentials have keys of their own, so that they
// are never logged with the URL).
func CheckNATSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
		return cfgErr("cluster.nats_url", "%q is not nats://host:port or tls://host:port", redactURL(s))
	}
	if u.User != nil {
		return cfgErr("cluster.nats_url", "carries credentials: use cluster.user/password, token or creds")
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return cfgErr("cluster.nats_url", "%q has no port", s)
	}
	return nil
}

// redactURL drops anything between "://" and "@", so that a URL with
// credentials is never echoed whole.
func redactURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		if j := strings.LastIndex(s, "@"); j > i {
			return s[:i+3] + "…@" + s[j+1:]
		}
	}
	if strings.Contains(s, "@") {
		return "(redacted)"
	}
	return s
}

// CheckCluster validates the cluster settings together, after flags have
// changed them: the embedded server runs on an ingest only, and listens
// beyond loopback only with the credentials of both roles configured
// (generated ones are for a bus on this host).
func (c *Config) CheckCluster() error {
	cl := &c.Cluster
	if err := CheckNATSURL(cl.NATSURL); err != nil {
		return err
	}
	if !cl.EmbeddedNATS {
		return nil
	}
	if cl.Role != RoleIngest {
		return cfgErr("cluster.embedded_nats", "only an ingest node runs the embedded NATS server (role is %s)", cl.Role)
	}
	if cl.EdgeToken != "" && (cl.EdgeToken == cl.Token || cl.EdgeToken == cl.Password) {
		return cfgErr("cluster.edge_token", "is the ingests' secret too (each role needs its own)")
	}
	u, _ := url.Parse(cl.NATSURL)
	if !Loopback(u.Host) && (cl.Token == "" && cl.User == "" || cl.EdgeToken == "") {
		return cfgErr("cluster.embedded_nats", "%q is not a loopback address and no bus credentials are configured (configure cluster.token and cluster.edge_token, or listen on loopback)", u.Host)
	}
	return nil
}
