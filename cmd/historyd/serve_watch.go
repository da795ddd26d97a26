package main

import (
	"fmt"
	"time"

	"github.com/historyd/historyd/service"
)

// watchSettings are what serve's WatchTurns flags set.
type watchSettings struct {
	config service.WatchConfig
	// maxAge is service.Frontend.StreamMaxAge.
	maxAge time.Duration
}

// watchFlags defines serve's WatchTurns flags and returns what they set.
// 0 turns a limit off, as for serve's other limits.
func watchFlags(e *envFlags) func() (watchSettings, error) {
	interval := e.duration("watch-poll-interval", "HISTORYD_WATCH_POLL_INTERVAL", service.DefaultWatchPollInterval,
		"how often a watched thread is read (WatchTurns; one reader per thread however many watch it), up to twice that while it does not change")
	perTenant := e.int("watch-max-per-tenant", "HISTORYD_WATCH_MAX_PER_TENANT", service.DefaultMaxWatchesPerTenant,
		"WatchTurns streams one tenant may hold open (without --auth-tokens, all callers together)")
	total := e.int("watch-max", "HISTORYD_WATCH_MAX", service.DefaultMaxWatches, "WatchTurns streams the server holds open")
	maxAge := e.duration("watch-max-age", "HISTORYD_WATCH_MAX_AGE", service.DefaultStreamMaxAge,
		"longest a WatchTurns stream (or a StreamSnapshots one, when --max-call-duration does not end it first) lasts; it then ends with UNAVAILABLE, and historyd's clients resume it at once from the last turn received, so no credential reads through one stream for longer (0: no maximum)")
	return func() (watchSettings, error) {
		if *maxAge < 0 {
			return watchSettings{}, fmt.Errorf("--watch-max-age %s: must not be negative (0 turns the maximum off)", *maxAge)
		}
		return watchSettings{
			config: service.WatchConfig{PollInterval: *interval, MaxPerTenant: offIfZero(*perTenant), MaxTotal: offIfZero(*total)},
			maxAge: *maxAge,
		}, nil
	}
}
