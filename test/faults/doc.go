// Package faults runs the historyd binary, built fresh from this tree,
// against PostgreSQL failing in the ways production databases do, and checks
// that every caller gets either a correct answer or the status code the API
// promises for the failure, never a wrong answer or a crash:
//
//   - TestStoreDownAtStart: the database is down when historyd starts;
//     historyd keeps serving NOT_SERVING and Unavailable, then recovers
//     without a restart once the database comes up.
//   - TestStoreSilentAtStart: the database accepts connections and never
//     answers; historyd says NOT_SERVING from its first moment and calls
//     fail with Unavailable.
//   - TestStoreRestartUnderLoad: the database is stopped and started, then
//     restarted, under continuous load; every answer is correct or
//     Unavailable, and the first correct answer follows the database's
//     return within two seconds.
//   - TestNoDialStormWhileStoreDown: PostgreSQL stopped under callers that
//     call again at once; historyd keeps at most one connection attempt in
//     flight, backs off to about two a second, answers every call at once
//     with Unavailable, logs a handful of lines, and recovers within
//     two seconds of PostgreSQL's return.
//   - TestLockedTableNotReady: LOCK TABLE checkpoints held; health turns
//     NOT_SERVING and /readyz 503 while calls time out, saying the store
//     had not answered, and both recover once it is released.
//   - TestSIGHUPEndsRevokedWatches, TestWatchMaxAge: a token revoked by
//     SIGHUP ends its open watch with Unauthenticated at once; a watch
//     ends at --watch-max-age with the resume trailer, and the Go client
//     resumes it without a failure.
//   - TestCorruptBlob: one turn's state blob is garbage; that turn answers
//     DataLoss naming the thread, checkpoint and channel, the rest of the
//     thread and other threads are unaffected.
//   - TestSIGTERMUnderLoad: SIGTERM with calls in flight; they finish, new
//     calls are refused with Unavailable, and the process exits 0 within
//     --shutdown-grace (also when the grace period runs out first).
//   - TestHundredThousandCheckpoints: a thread of 100,000 checkpoints is
//     served within a bounded peak resident memory.
//   - TestLongThreadsInBoundedMemory: under the manifest's GOMEMLIMIT, five
//     threads of 200,000 checkpoints read in turn, each too large to cache,
//     keep the peak resident memory under the manifest's memory limit.
//   - TestParentCycle: parent links that loop, written into a cached
//     thread, answer DATA_LOSS naming the loop, end its watch, leave
//     historyd idle and let SIGTERM end it within its grace period.
//   - TestStoreStartingUpAtStart: the database answers every connection
//     with 57P03 (a standby with hot_standby off); historyd serves
//     NOT_SERVING and Unavailable, and once the standby is promoted, turns
//     SERVING without a restart.
//   - TestUnhealableAtStart: an unknown database, an unknown role, a wrong
//     password, a missing grant, and through PgBouncer an unknown database,
//     an unknown user and a refused startup parameter each stop historyd at
//     once with a non-zero exit and one line naming the DSN (password
//     masked) and what to fix.
//   - TestThroughPgBouncer: Debian's PgBouncer, stock settings, in
//     transaction and session mode, and in transaction mode without
//     --pooler transaction (found and warned of), 8 concurrent clients
//     making every kind of call; every answer is exactly the directly
//     connected historyd's.
//   - TestHotStandby: served from a real hot standby; a turn written on the
//     primary appears once replayed, and with replay paused neither a new
//     turn nor the pruning of an old one shows until it resumes.
//   - TestStatusesNameNoDatabase: every status a caller can get, provoked
//     against a database of its own; none names its host, port, role or
//     database, and the log has the causes, one line each.
//
// Most tests need PostgreSQL: the ones that stop or restart it, or need a
// standby or a pg_hba.conf of their own, start their own throwaway clusters
// with scripts/pg-test.sh, each with an env file in its temporary directory
// and ports it picks (PG_TEST_PORT, PG_TEST_STANDBY_PORT), inheriting none
// of the shared cluster's PG_TEST_* settings; the others use a fresh schema in the database
// HISTORYD_TEST_SUPERUSER_DSN (or HISTORYD_TEST_DSN) names, and the
// PgBouncer in front of it (HISTORYD_TEST_POOLER_*), which scripts/test.sh
// (`make test`) provides. With -short they are skipped.
package faults
