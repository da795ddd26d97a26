package clients_test

import (
	"testing"

	"github.com/historyd/historyd/internal/testbin"
)

// TestJSClient runs the TypeScript client's own tests (npm test in
// client/js): its unit tests against an in-process gRPC server, and its
// end-to-end test, in which a LangGraph.js agent's tool node runs
// inspectState against the historyd built here, over a LangGraph.js thread
// the conformance writer puts in PostgreSQL.
func TestJSClient(t *testing.T) {
	skipIfShort(t)
	jsDir := need(t, "HISTORYD_TEST_CLIENT_JS", "npm test runs in client/js with its node_modules (scripts/jsclient.sh installs them)")
	dsn := need(t, "HISTORYD_TEST_DSN", "the end-to-end test writes a LangGraph.js thread to PostgreSQL (scripts/pg-test.sh starts one)")
	writer := need(t, "HISTORYD_TEST_NODE", "the end-to-end test writes its thread with test/conformance/js's writer (scripts/nodeenv.sh installs its node_modules)")
	bin := testbin.Build(t)
	out := run(t, jsDir, []string{"HISTORYD_BIN=" + bin, "HISTORYD_TEST_DSN=" + dsn, "HISTORYD_TEST_NODE=" + writer}, "npm", "test", "--silent")
	t.Logf("npm test:\n%s", out)
}

// TestPythonClient runs the Python client's unit tests in the client
// virtualenv, which has langchain-core, grpcio and protobuf and nothing else
// (test/e2e runs them again in the project virtualenv, beside
// mcp-toolsets-runtime).
func TestPythonClient(t *testing.T) {
	skipIfShort(t)
	python := need(t, "HISTORYD_TEST_CLIENT_PYTHON", "the client virtualenv's interpreter (scripts/pyclient.sh builds it)")
	root := testbin.RepoRoot(t)
	out := run(t, root+"/client/python/tests", []string{"PYTHONPATH=" + root + "/client/python/src"}, python, "-m", "unittest", "discover", "-s", ".", "-v")
	t.Logf("unittest:\n%s", out)
}
