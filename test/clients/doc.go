// Package clients holds every historyd client to one behaviour: the Go
// client with client/inspect, the Python client (client/python) and the
// TypeScript client (client/js) answer the same inspect_state calls, against
// the same running historyd, with the same text, byte for byte.
//
// The calls and their answers are one table, client/testdata/cases.json. The
// test writes the fixture (the demo threads of `historyd demo`, and the
// threads of fixture_test.go), serves it with the historyd binary built from
// this tree, answers every case with the Go inspector, then runs the Python
// and TypeScript case runners against the same address and compares all
// three with the table. It also runs the TypeScript package's own tests
// (npm test), whose end-to-end test drives a LangGraph.js agent against
// historyd over PostgreSQL; a LangGraph agent with the Python tool under
// invoke and ainvoke; every client and the CLI against a historyd in the
// other of TLS and plaintext; and the Python and TypeScript packages
// installed the ordinary way (pip from git, npm from a folder and from git).
//
// See client/testdata/README.md for how to add a case.
package clients
