package daemon

import (
	"errors"
	"slices"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/internal/config"
)

// ReloadFrom reloads the configuration load returns (Reload); a load
// that fails changes nothing, is counted as refused, and its error is
// returned as is.
func (d *Daemon) ReloadFrom(load func() (*config.Config, error)) error {
	cfg, err := load()
	if err != nil {
		d.reloads.WithLabelValues("refused").Inc()
		return err
	}
	return d.Reload(cfg)
}

// ErrReloadAuth refuses a reload that would turn authentication on or
// off: which routes need a token, and who owns the subscribers already
// created, are fixed for the process's life.
var ErrReloadAuth = errors.New("daemon: a reload cannot turn authentication on or off (tokens and auth.jwt both absent on one side): restart instead")

// Reload applies what of cfg, a configuration parsed and resolved in
// full, is reloadable, without dropping a connection:
//
//   - tokens, FANOUTD_TOKENS and auth.jwt (keys, JWKS file, issuer,
//     audience): swapped at once; then every connection's token is checked
//     again, and one whose token was removed, whose JWT no longer verifies
//     or whose scopes no longer cover its subscriptions is closed with 4004
//     (token_revoked);
//   - venues.<v>.symbols of the venues running: a symbol added is
//     subscribed at the venue; one removed is no longer pinned, and is
//     unsubscribed once no subscriber has held it for unsubscribe_after.
//
// Every other key is read at start only. It returns ErrReloadAuth, having
// changed nothing, if cfg turns authentication on or off.
func (d *Daemon) Reload(cfg *config.Config) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	na := api.NewAuthWithJWT(cfg.Tokens, cfg.JWT)
	if na.Enabled() != d.auth.Enabled() {
		d.reloads.WithLabelValues("refused").Inc()
		return ErrReloadAuth
	}
	revoked := 0
	if na.Enabled() {
		d.auth.Replace(na)
		revoked = d.ws.Reauthenticate()
	}
	added, unpinned := 0, 0
	for _, vc := range cfg.Venues {
		vr := d.byName[vc.Name]
		if vr == nil {
			continue // a venue added or enabled waits for a restart
		}
		var subscribe []string
		vr.mu.Lock()
		for sym, u := range vr.symbols {
			if u.pinned && !slices.Contains(vc.Symbols, sym) {
				u.pinned = false // the sweep releases it once nobody holds it
				unpinned++
			}
		}
		for _, sym := range vc.Symbols {
			u, have := vr.symbols[sym]
			if !have {
				u = &symbolUse{}
				vr.symbols[sym] = u
				subscribe = append(subscribe, sym)
			}
			if !u.pinned {
				u.pinned, u.idleSince = true, time.Time{}
				added++
			}
		}
		vr.mu.Unlock()
		for _, sym := range subscribe {
			if err := vr.adapter.Subscribe(sym); err != nil {
				d.log.Warn("reload: venue subscribe failed", "venue", vc.Name, "symbol", sym, "err", err)
			}
		}
	}
	d.reloads.WithLabelValues("applied").Inc()
	d.log.Info("configuration reloaded (tokens, auth.jwt and venues.<v>.symbols; other keys take effect at restart)", "tokens", len(cfg.Tokens), "jwt", cfg.JWT != nil, "connections_revoked", revoked,
		"symbols_pinned", added, "symbols_unpinned", unpinned)
	return nil
}
