package format

// Map is a map whose entries are written in the order given. Python dicts
// keep insertion order and LangGraph's structures (checkpoints, message
// fields) have a fixed one; a map[string]any cannot say which, so the
// encoder writes those with their keys sorted instead.
type Map []Field

// Field is one entry of a Map.
type Field struct {
	// Key is the entry's key. Python dicts in LangGraph's own structures
	// are keyed by strings.
	Key string
	// Value is the entry's value: anything the writers accept.
	Value any
}

// Get returns the value stored under key, and whether there is one. A Map
// is a list, so this is a linear search; Maps are built for writing, and
// the few lookups callers make are on small ones.
func (m Map) Get(key string) (any, bool) {
	for _, f := range m {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// Set replaces the value under key, or appends the entry when key is new,
// the way assigning to a Python dict keeps an existing key's position.
func (m Map) Set(key string, v any) Map {
	for i := range m {
		if m[i].Key == key {
			m[i].Value = v
			return m
		}
	}
	return append(m, Field{key, v})
}
