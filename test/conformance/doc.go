// Package conformance checks historyd against real LangGraph threads.
//
// Its tests drive LangGraph (Python, and LangGraph.js) with its own
// checkpointers, PostgreSQL and SQLite, then serve the same database or file
// with historyd over gRPC and compare every answer with what LangGraph itself
// reports about the thread, and with the reference implementation
// (mcp-toolsets-runtime's mcp_agent.history) where that can run; one test
// reads an SQLite file through historyd while LangGraph is still writing it.
// See README.md.
package conformance
