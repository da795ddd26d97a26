// Package conformance checks historyd against real LangGraph threads.
//
// Its tests drive LangGraph (Python, and LangGraph.js) with its own
// PostgreSQL checkpointers, then serve the same database with historyd over
// gRPC and compare every answer with what LangGraph itself reports about the
// thread, and with the reference implementation (mcp-toolsets-runtime's
// mcp_agent.history) where that can run. See README.md.
package conformance
