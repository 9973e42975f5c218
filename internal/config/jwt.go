package config

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/venues"
)

// authConfig is the auth: section as written.
type authConfig struct {
	JWT *jwtConfig `yaml:"jwt"`
}

// jwtConfig is auth.jwt as written.
type jwtConfig struct {
	Issuer         string         `yaml:"issuer"`
	Audience       string         `yaml:"audience"`
	Leeway         string         `yaml:"leeway"`
	ExpiringNotice string         `yaml:"expiring_notice"`
	JWKSFile       string         `yaml:"jwks_file"`
	Keys           []jwtKeyConfig `yaml:"keys"`
}

type jwtKeyConfig struct {
	KID           string `yaml:"kid"`
	Alg           string `yaml:"alg"`
	Secret        string `yaml:"secret"`
	PublicKey     string `yaml:"public_key"`
	PublicKeyFile string `yaml:"public_key_file"`
}

// JWT defaults.
const (
	defaultExpiringNotice = time.Minute
	maxLeeway             = 5 * time.Minute
)

// Errors is several bad values at once, each an *Error: its text is one
// line per value.
type Errors []*Error

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, x := range e {
		lines[i] = x.Error()
	}
	return strings.Join(lines, "\n")
}

// resolveJWT validates auth.jwt, reading its key files; nil jc is no
// JWTs. Every bad key is named, not only the first (an Errors).
func resolveJWT(jc *jwtConfig) (*api.JWTOptions, time.Duration, error) {
	if jc == nil {
		return nil, defaultExpiringNotice, nil
	}
	var errs Errors
	bad := func(key, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	o := &api.JWTOptions{Issuer: jc.Issuer, Audience: jc.Audience, CheckScopes: checkScopes}
	if jc.Issuer == "" {
		bad("auth.jwt.issuer", "missing: every JWT's iss must equal it")
	}
	if jc.Audience == "" {
		bad("auth.jwt.audience", "missing: every JWT's aud must include it")
	}
	if jc.Leeway != "" {
		d, err := time.ParseDuration(jc.Leeway)
		if err != nil || d < 0 || d > maxLeeway {
			bad("auth.jwt.leeway", "%q is not a duration from 0 to 5m", jc.Leeway)
		}
		o.Leeway = d
	}
	notice := defaultExpiringNotice
	if jc.ExpiringNotice != "" {
		d, err := time.ParseDuration(jc.ExpiringNotice)
		if err != nil || d < time.Second || d > time.Hour {
			bad("auth.jwt.expiring_notice", "%q is not a duration from 1s to 1h", jc.ExpiringNotice)
		}
		notice = d
	}
	kids := map[string]string{} // kid → the key that has it
	add := func(key string, k api.JWTKey) {
		if other, dup := kids[k.ID]; dup {
			bad(key, "kid %q is also %s's (a kid picks one key)", k.ID, other)
			return
		}
		kids[k.ID] = key
		o.Keys = append(o.Keys, k)
	}
	for i, kc := range jc.Keys {
		key := fmt.Sprintf("auth.jwt.keys[%d]", i)
		k, err := jwtKey(key, kc)
		if err != nil {
			errs = append(errs, err.(*Error))
			continue
		}
		add(key, k)
	}
	if jc.JWKSFile != "" {
		key := "auth.jwt.jwks_file"
		data, err := os.ReadFile(jc.JWKSFile)
		if err != nil {
			bad(key, "%v", err)
		} else {
			keys, kerrs := api.ParseJWKS(data)
			for _, e := range kerrs {
				bad(key, "%s: %v", jc.JWKSFile, e)
			}
			for _, k := range keys {
				add(key+" ("+jc.JWKSFile+")", k)
			}
		}
	}
	if len(jc.Keys) == 0 && jc.JWKSFile == "" {
		bad("auth.jwt", "no keys: set keys, jwks_file or both")
	}
	if len(errs) > 0 {
		return nil, 0, errs
	}
	return o, notice, nil
}

// jwtKey resolves one of auth.jwt.keys.
func jwtKey(key string, kc jwtKeyConfig) (api.JWTKey, error) {
	k := api.JWTKey{ID: kc.KID, Alg: kc.Alg}
	pemText := kc.PublicKey
	if kc.PublicKeyFile != "" {
		if pemText != "" {
			return k, cfgErr(key, "set public_key or public_key_file, not both")
		}
		b, err := os.ReadFile(kc.PublicKeyFile)
		if err != nil {
			return k, cfgErr(key+".public_key_file", "%v", err)
		}
		pemText = string(b)
	}
	switch kc.Alg {
	case api.AlgHS256:
		if pemText != "" {
			return k, cfgErr(key, "an HS256 key has a secret, not a public key")
		}
		k.Key = []byte(kc.Secret)
	case api.AlgRS256, api.AlgES256:
		if kc.Secret != "" {
			return k, cfgErr(key+".secret", "an %s key has a public key (public_key or public_key_file), not a secret", kc.Alg)
		}
		if pemText == "" {
			return k, cfgErr(key, "an %s key needs public_key or public_key_file (PEM)", kc.Alg)
		}
		pk, err := parsePublicKey(pemText)
		if err != nil {
			return k, cfgErr(key+".public_key", "%v", err)
		}
		k.Key = pk
	}
	if err := api.CheckKey(k); err != nil {
		return k, cfgErr(key, "%v", err)
	}
	return k, nil
}

// parsePublicKey parses one PEM public key (PKIX "PUBLIC KEY", or PKCS #1
// "RSA PUBLIC KEY").
func parsePublicKey(text string) (any, error) {
	b, _ := pem.Decode([]byte(text))
	if b == nil {
		return nil, errors.New("not a PEM block")
	}
	switch b.Type {
	case "PUBLIC KEY":
		pk, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("not a public key: %v", err)
		}
		switch pk.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey:
			return pk, nil
		}
		return nil, fmt.Errorf("a %T is neither RSA nor ECDSA", pk)
	case "RSA PUBLIC KEY":
		pk, err := x509.ParsePKCS1PublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("not an RSA public key: %v", err)
		}
		return pk, nil
	}
	return nil, fmt.Errorf("a PEM %q block is not a public key (a private key does not belong here)", b.Type)
}

// checkScopes validates a JWT's scope claims as a static token's scopes
// are validated, so that a typo is refused rather than a scope that
// silently matches nothing.
func checkScopes(t *api.Token) error {
	for _, v := range t.Venues {
		if !slices.Contains(venues.Names(), v) {
			return fmt.Errorf("venues: %q is not a venue", v)
		}
	}
	for _, p := range t.Streams {
		if err := checkPattern(p); err != nil {
			return fmt.Errorf("streams: %q %v", p, err)
		}
	}
	return checkTenants("tenants", t.Tenants)
}
