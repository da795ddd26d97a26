"""python -m unittest test_scenarios (from this directory, in the venv
scripts/pyenv.sh builds): every scenario of write_scenario.py written to a
fresh SQLite file, and to PostgreSQL when HISTORYD_TEST_DSN is set, its
truth checked (write_scenario.check) and read back with --read-only."""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def check(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, os.path.join(HERE, "write_scenario.py"), "--check", *flags],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


class Scenarios(unittest.TestCase):
    def test_sqlite(self) -> None:
        r = check()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(" passed, 0 failed", r.stdout)

    def test_postgres(self) -> None:
        dsn = os.environ.get("HISTORYD_TEST_DSN")
        if not dsn:
            self.skipTest("HISTORYD_TEST_DSN is not set (scripts/pg-test.sh start; eval \"$(scripts/pg-test.sh env)\")")
        r = check("--dsn", dsn, "--schema", "scenario_check")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(" passed, 0 failed", r.stdout)


if __name__ == "__main__":
    unittest.main()
