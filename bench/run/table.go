package run

import (
	"fmt"
	"io"
	"os"
	"strings"
)

func mkdir(dir string) error { return os.MkdirAll(dir, 0o755) }

// Table writes the report as one Markdown table, preceded by a line
// naming the machine and the versions.
func Table(w io.Writer, rep *Report) {
	v := rep.Versions
	fmt.Fprintf(w, "historyd benchmark, %s mode, %s: %s CPUs (%s), load at start %s, %.0f s in all\n",
		rep.Mode, rep.Started.Format("2006-01-02 15:04 MST"), rep.Machine["nproc"], rep.Machine["cpu"], rep.Machine["load at start"], rep.Seconds)
	fmt.Fprintf(w, "historyd %s; %s; PostgreSQL %s; langgraph %s, langgraph-checkpoint-postgres %s, mcp-toolsets-runtime %s, Python %s\n\n",
		v["historyd"], strings.TrimPrefix(v["go"], "go version "), pgVersion(v["postgresql"]), v["langgraph"], v["langgraph-checkpoint-postgres"], v["mcp-toolsets-runtime"], v["python"])
	fmt.Fprintln(w, "| row | measurement | historyd | reference / anchor | ratio | floor | verdict | load (1 min) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %.2f |\n",
			cell(r.ID), cell(r.What), cell(r.Historyd), cell(r.Other), cell(r.Ratio), cell(r.Floor), cell(r.Verdict), r.Load1)
	}
}

func cell(s string) string {
	if s == "" {
		return "–"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}

// pgVersion shortens "PostgreSQL 15.8 (Debian ...) on x86_64..." to "15.8".
func pgVersion(s string) string {
	f := strings.Fields(s)
	if len(f) >= 2 && f[0] == "PostgreSQL" {
		return f[1]
	}
	return s
}
