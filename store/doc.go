// Package store derives a LangGraph thread's turns from its checkpoints and
// reads the session state each turn ended on. It holds the turn rules, the
// caches and the StateEntry convention. It reads through a backend.Backend
// (package store/backend, the contract store/postgres and store/sqlite
// implement), which only answers queries with rows and bytes; what those
// bytes mean is langgraph/codec's, and the gRPC layer above only maps
// results to the wire.
//
// Start from New and Store. History derives a thread's turns (derive.go is
// the one place the turn rules live, questions.go learns each thread's
// questions from its messages versions); ReadEncoded reads the state the
// turns ended on (state.go; delta.go rebuilds a DeltaChannel's values from
// writes); Threads lists threads.
package store
