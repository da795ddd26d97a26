// Package e2e drives historyd's Python client end to end: mcp-toolsets-runtime's
// inspect_state, with HistorydThreadHistory as its history, asked about a
// real LangGraph thread that historyd serves from PostgreSQL, before and
// after its first turns are pruned. See README.md.
package e2e
