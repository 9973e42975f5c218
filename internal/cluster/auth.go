package cluster

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// Roles on the bus: each has its own secret and its own permissions
// (Permissions). A login is a token (the role's secret), or a user name
// and the role's secret as its password.
const (
	RoleIngest = "ingest"
	RoleEdge   = "edge"
)

// Embedded server's JetStream limits: the store as a whole and the one
// account every role uses. fanoutd keeps two buckets (names, leases) and
// no consumers; a record is a few hundred bytes per named subscriber.
const (
	embeddedMaxMemory    = 64 << 20
	embeddedMaxStore     = 1 << 30
	embeddedMaxStreams   = 4
	embeddedMaxConsumers = 16
)

// Permissions returns what each role may publish and subscribe under
// prefix. An ingest publishes the venues' events, notices and heartbeats,
// answers book, want and recover requests (replies on _INBOX.>) and keeps
// the lease bucket; an edge reads those, asks (want, book, recover), keeps the names bucket
// and announces takeovers. Neither may touch another stream of JetStream:
// the API subjects are allowed per bucket.
func Permissions(prefix string) (ingest, edge *server.Permissions) {
	b := strings.ReplaceAll(prefix, ".", "_")
	kv := func(bucket string) []string {
		s := "KV_" + bucket
		return []string{"$KV." + bucket + ".>", "$JS.API.STREAM.INFO." + s, "$JS.API.STREAM.CREATE." + s,
			"$JS.API.STREAM.UPDATE." + s, "$JS.API.STREAM.MSG.GET." + s, "$JS.API.DIRECT.GET." + s + ".>"}
	}
	// An edge watches the lease bucket (fencing, Edge.watchLeases): it
	// reads the stream and runs an ordered consumer, and writes nothing.
	watch := func(bucket string) []string {
		s := "KV_" + bucket
		return []string{"$JS.API.STREAM.INFO." + s, "$JS.API.STREAM.MSG.GET." + s, "$JS.API.CONSUMER.CREATE." + s, "$JS.API.CONSUMER.CREATE." + s + ".>",
			"$JS.API.CONSUMER.DELETE." + s + ".>", "$JS.FC." + s + ".>"}
	}
	ingest = &server.Permissions{
		Publish: &server.SubjectPermission{Allow: append([]string{prefix + ".ev.>", prefix + ".notice.*", prefix + ".hb.*",
			"_INBOX.>", "$JS.API.INFO"}, kv(b+"_leases")...)},
		Subscribe: &server.SubjectPermission{Allow: []string{prefix + ".>", "_INBOX.>"}},
	}
	edge = &server.Permissions{
		Publish: &server.SubjectPermission{Allow: append(append([]string{prefix + ".want.*", prefix + ".book.*.*", prefix + ".recover.*", prefix + ".names.takeover",
			"$JS.API.INFO"}, kv(b+"_names")...), watch(b+"_leases")...)},
		Subscribe: &server.SubjectPermission{Allow: []string{prefix + ".ev.>", prefix + ".notice.*", prefix + ".hb.*",
			prefix + ".names.takeover", "_INBOX.>"}},
	}
	return ingest, edge
}

// busAuth is the embedded server's authentication: a login names its
// role by its secret.
type busAuth struct{ roles []busRole }

type busRole struct {
	user   string
	secret [32]byte // sha256 of the secret: compared in constant time whatever its length
	perms  *server.Permissions
}

var _ server.Authentication = (*busAuth)(nil)

// Check accepts a client whose token is a role's secret, or whose user and
// password are a role's, and gives it that role's permissions.
func (a *busAuth) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if o == nil {
		return false
	}
	for _, r := range a.roles {
		ok := false
		switch {
		case o.Username == "" && o.Token != "":
			h := sha256.Sum256([]byte(o.Token))
			ok = subtle.ConstantTimeCompare(h[:], r.secret[:]) == 1
		case o.Username == r.user && o.Password != "":
			h := sha256.Sum256([]byte(o.Password))
			ok = subtle.ConstantTimeCompare(h[:], r.secret[:]) == 1
		}
		if ok {
			c.RegisterUser(&server.User{Username: r.user, Permissions: r.perms})
			return true
		}
	}
	return false
}

// EmbeddedCredentials fills in the secrets the embedded server needs that
// c does not configure: the ingests' (this node's own login, as Token) and
// the edges' (EdgeToken), each 32 random bytes in hex, kept in
// c.NATSDir/<role>.token (mode 0600; read again on the next start, so edges
// given it keep working). It returns c with them and the files it wrote
// or read; a configured secret is never written anywhere.
func EmbeddedCredentials(c Options) (Options, []string, error) {
	var files []string
	fill := func(dst *string, role string) error {
		if *dst != "" {
			return nil
		}
		p := filepath.Join(c.NATSDir, role+".token")
		s, err := tokenFile(p)
		if err != nil {
			return fmt.Errorf("cluster: embedded nats: %s credentials: %w", role, err)
		}
		*dst = s
		files = append(files, p)
		return nil
	}
	if c.Token == "" && c.User == "" && c.Creds == "" {
		if err := fill(&c.Token, RoleIngest); err != nil {
			return c, nil, err
		}
	}
	if err := fill(&c.EdgeToken, RoleEdge); err != nil {
		return c, nil, err
	}
	return c, files, nil
}

// tokenFile returns the secret in path, first writing a new one there if
// there is none.
func tokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
		return "", fmt.Errorf("%s is empty", path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	var r [32]byte
	rand.Read(r[:])
	s := hex.EncodeToString(r[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(s + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", err
	}
	return s, nil
}

// embeddedAuth is the embedded server's authentication for c, whose
// secrets EmbeddedCredentials completed: the ingests log in with c's own
// credentials (user c.User, else "ingest"), the edges with c.EdgeToken.
func embeddedAuth(c Options) (*busAuth, error) {
	ingestSecret, ingestUser := c.Token, RoleIngest
	if c.User != "" {
		ingestSecret, ingestUser = c.Password, c.User
	}
	if ingestSecret == "" || c.EdgeToken == "" {
		return nil, errors.New("cluster: embedded nats: the ingests' and the edges' secrets are both needed")
	}
	if ingestUser == RoleEdge {
		return nil, errors.New(`cluster: embedded nats: user "edge" is the edges' login; name the ingests' user otherwise`)
	}
	if ingestSecret == c.EdgeToken {
		return nil, errors.New("cluster: embedded nats: the ingests and the edges need different secrets")
	}
	pi, pe := Permissions(c.SubjectPrefix)
	return &busAuth{roles: []busRole{
		{user: ingestUser, secret: sha256.Sum256([]byte(ingestSecret)), perms: pi},
		{user: RoleEdge, secret: sha256.Sum256([]byte(c.EdgeToken)), perms: pe},
	}}, nil
}

// StandaloneConfig returns the part of a standalone nats-server's
// configuration that gives fanoutd under prefix what the embedded server
// gives it: one account, FANOUTD, with JetStream bounded as the embedded
// server's, and its two users, ingest and edge, each with its role's
// Permissions. Passwords are written as given (nats-server also takes
// bcrypt hashes: `nats server passwd`). Nodes log in with cluster.user
// and cluster.password.
func StandaloneConfig(prefix, ingestPassword, edgePassword string) string {
	pi, pe := Permissions(prefix)
	var b strings.Builder
	fmt.Fprintf(&b, "jetstream {\n  max_memory_store: %d\n  max_file_store: %d\n}\n", embeddedMaxMemory, embeddedMaxStore)
	fmt.Fprintf(&b, "accounts {\n  FANOUTD {\n    jetstream {\n      max_streams: %d\n      max_consumers: %d\n      max_mem: -1\n      max_file: -1\n    }\n    users = [\n",
		embeddedMaxStreams, embeddedMaxConsumers)
	for _, u := range []struct {
		name, pass string
		p          *server.Permissions
	}{{RoleIngest, ingestPassword, pi}, {RoleEdge, edgePassword, pe}} {
		fmt.Fprintf(&b, "      {\n        user: %s\n        password: %q\n        permissions {\n", u.name, u.pass)
		fmt.Fprintf(&b, "          publish { allow: %s }\n", confList(u.p.Publish.Allow))
		fmt.Fprintf(&b, "          subscribe { allow: %s }\n", confList(u.p.Subscribe.Allow))
		b.WriteString("        }\n      }\n")
	}
	b.WriteString("    ]\n  }\n}\n")
	return b.String()
}

func confList(subjects []string) string {
	q := make([]string, len(subjects))
	for i, s := range subjects {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
