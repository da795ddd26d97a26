package main

import (
	"github.com/historyd/historyd/service"
)

// watchFlags defines serve's WatchTurns flags and returns what they set.
// 0 turns a limit off, as for serve's other limits.
func watchFlags(e *envFlags) func() service.WatchConfig {
	interval := e.duration("watch-poll-interval", "HISTORYD_WATCH_POLL_INTERVAL", service.DefaultWatchPollInterval,
		"how often a watched thread is read (WatchTurns; one reader per thread however many watch it), up to twice that while it does not change")
	perTenant := e.int("watch-max-per-tenant", "HISTORYD_WATCH_MAX_PER_TENANT", service.DefaultMaxWatchesPerTenant,
		"WatchTurns streams one tenant may hold open (without --auth-tokens, all callers together)")
	total := e.int("watch-max", "HISTORYD_WATCH_MAX", service.DefaultMaxWatches, "WatchTurns streams the server holds open")
	return func() service.WatchConfig {
		return service.WatchConfig{PollInterval: *interval, MaxPerTenant: offIfZero(*perTenant), MaxTotal: offIfZero(*total)}
	}
}
