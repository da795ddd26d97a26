package auth

import "time"

// SetCheckInterval lets tests see file changes without waiting.
func (s *ServerTLS) SetCheckInterval(d time.Duration) { s.checkEvery = d }
