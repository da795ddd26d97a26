package storetest

import (
	"testing"

	"github.com/historyd/historyd/store/backend"
)

// TestMemory holds the in-memory backend to the same suite as the real
// ones, so tests built on it stand on a backend that behaves like them.
func TestMemory(t *testing.T) {
	Run(t, func(t *testing.T) (backend.Backend, Writer) {
		m := NewMemory()
		return m, m
	})
}
