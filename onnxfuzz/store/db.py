"""A campaign's state in one embedded SQLite database (``DIR/campaign.db``).

A test's row, its per-backend results and the bug hit counts are written together (a
savepoint each) and committed in one transaction with the other tests stored in the last
``batch_seconds`` (0: a transaction per test), so a campaign killed at any moment (``kill
-9`` included) resumes with every committed test counted exactly once and the ones not yet
committed, like the interrupted one, run again. Whatever else the campaign writes meanwhile
(its diversity record) commits with the tests it counts.

Besides the latest diversity record (``meta``), ``diversity_history`` keeps the diversity
figures as they stood every few seconds (one row per write, keyed by the tests counted),
for coverage curves; a campaign.db older than it simply has no rows.

A bug is keyed by its signature and the op pattern of its reduced model: two findings
with the same signature whose reductions end in different ops are different bugs. An
intermittent or state-dependent bug is keyed by its signature's family instead (pattern
``intermittent`` or ``state``: one bundle per family). With one reference and one target, a
failure of the reference alone (pattern ``reference``) is kept in ``reference_bugs``, not
among the bugs. A finding that no fresh run re-created is stored with the verdict
``not-reproducible`` and never becomes a bug.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnxfuzz.errors import UsageError
from onnxfuzz.judge.signature import bug_id

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tests (
    id INTEGER PRIMARY KEY, seed INTEGER NOT NULL, ops TEXT NOT NULL, opset INTEGER NOT NULL,
    seconds REAL NOT NULL, backend_seconds REAL NOT NULL, finished REAL NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    test_id INTEGER NOT NULL, backend TEXT NOT NULL, verdict TEXT NOT NULL, stage TEXT,
    signature TEXT, bug TEXT, detail TEXT, PRIMARY KEY (test_id, backend));
CREATE TABLE IF NOT EXISTS bugs (
    key TEXT PRIMARY KEY, signature TEXT NOT NULL, id TEXT NOT NULL, verdict TEXT NOT NULL,
    stage TEXT, backend TEXT NOT NULL, suspect TEXT, pattern TEXT NOT NULL,
    first_test INTEGER NOT NULL, first_seen REAL NOT NULL, hits INTEGER NOT NULL,
    seeds TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS results_by_verdict ON results (backend, verdict);
CREATE TABLE IF NOT EXISTS diversity_history (
    tests INTEGER PRIMARY KEY, at REAL NOT NULL, summary TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS guide (
    test_id INTEGER PRIMARY KEY, decision TEXT NOT NULL, keys BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS optimizations (
    backend TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, tests INTEGER NOT NULL,
    first_test INTEGER, PRIMARY KEY (backend, kind, name));
CREATE TABLE IF NOT EXISTS feedback_cost (
    backend TEXT PRIMARY KEY, tests INTEGER NOT NULL, backend_seconds REAL NOT NULL,
    feedback_seconds REAL NOT NULL, errors INTEGER NOT NULL, last_error TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reference_bugs (
    key TEXT PRIMARY KEY, signature TEXT NOT NULL, id TEXT NOT NULL, verdict TEXT NOT NULL,
    stage TEXT, backend TEXT NOT NULL, suspect TEXT, pattern TEXT NOT NULL,
    first_test INTEGER NOT NULL, first_seen REAL NOT NULL, hits INTEGER NOT NULL,
    seeds TEXT NOT NULL);
"""
BUG_COLUMNS = (
    "key",
    "signature",
    "id",
    "verdict",
    "stage",
    "backend",
    "suspect",
    "pattern",
    "first_test",
    "first_seen",
    "hits",
    "seeds",
)
MAX_SEEDS = 1000  # seeds kept per bug
# The verdict of a finding that no fresh run re-created (onnxfuzz.run.confirm).
NOT_REPRODUCIBLE = "not-reproducible"
REFERENCE_ONLY = "reference"  # the pattern of a failure of the reference alone
# The patterns of bugs filed one per family (their bundle says what they were reduced to)
# A state-dependent bug is filed once per backend (a stale cache shows as whatever the stale
# state meets: wrong values, a rank error, a type error); its other signatures are listed
# with it (``Store.follow_ups``, "same state").
STATE = "state"
SETTLED_PATTERNS = ("intermittent", STATE)
# The campaign folder's subfolder of those failures' bundles (unreduced), beside bugs/.
REFERENCE_BUGS = "reference-bugs"
# Findings whose reduction raised (kept unreduced): meta key -> {signature: "Error: why"};
# the tracebacks are in the campaign folder's REDUCER_LOG.
REDUCTION_FAILURES = "reduction_failures"
REDUCER_LOG = "reducer-errors.log"
# Meta key: bug key -> the signature of the wrong result that bug's crash follows
# (``reduce.precursor``): its family is that result's, the root cause.
FOLLOWS = "follows"
# Meta key: bug key -> {crash signature: {"ops", "seed", "why"}}: the crashes joined to that
# bug once it was filed instead of filed again: shown to follow its wrong result ("why":
# "follows"), or of its family and reduced to its ops, or to those and more ("same crash").
FOLLOW_UPS = "follow_ups"
# Meta key: bug key -> {"nodes", "runs", "seconds"} of a bundle whose reduction stopped at
# its time budget with two nodes or more left (a smaller model may show the bug).
REDUCTION_STOPPED = "reduction_stopped"
# Meta key: signature -> the backend the ONNX reference evaluator's second opinion finds
# wrong (``judge.second_opinion``) on a no-majority mismatch: the one of the two it does not
# agree with. Tables show it as the suspect, "(by the evaluator)".
EVALUATOR_SUSPECTS = "evaluator_suspects"


@dataclass
class Result:
    """One backend's verdict on one test; ``bug`` is the bug key for bug verdicts."""

    backend: str
    verdict: str
    stage: str | None = None
    signature: str | None = None
    bug: str | None = None
    detail: str = ""
    suspect: str | None = None
    pattern: str = ""


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # WAL: durable against process kills
        self.db.executescript(SCHEMA)
        # label -> display name (onnxfuzz.backend.display_names), for bug ids
        self.names: dict[str, str] = self.get_meta("names") or {}
        # Tests stored within this many seconds share a transaction: a commit per test is
        # a large share of storing one when tests take a few milliseconds.
        self.batch_seconds = 0.0
        self._batch_began = 0.0  # time.perf_counter() when the open transaction began

    # --- transactions --------------------------------------------------------------
    def commit(self) -> None:
        """Commit the tests stored since the last commit (and anything written with them)."""
        if self.db.in_transaction:
            self.db.execute("COMMIT")

    def commit_due(self) -> None:
        """Commit if the open transaction is ``batch_seconds`` old."""
        if self.db.in_transaction and time.perf_counter() - self._batch_began >= self.batch_seconds:
            self.db.execute("COMMIT")

    @classmethod
    def create(cls, path: Path, meta: dict[str, Any]) -> Store:
        """A new campaign.db holding ``meta`` from its first moment: built beside ``path``
        and renamed into place, so an interrupt (Ctrl-C, ``kill -9``) never leaves a
        campaign.db that ``--resume`` cannot read (one without its options)."""
        part = path.with_name(path.name + ".new")
        part.unlink(missing_ok=True)  # a creation interrupted before
        db = sqlite3.connect(part, isolation_level=None)
        try:
            db.executescript(SCHEMA)
            with db:
                db.execute("BEGIN")
                for key, value in meta.items():
                    db.execute("INSERT INTO meta VALUES (?, ?)", (key, json.dumps(value)))
        finally:
            db.close()
        os.replace(part, path)
        return cls(path)

    @classmethod
    def open_existing(cls, path: Path) -> Store:
        """An existing campaign.db; a clear error for one that is corrupt or locked."""
        wal = path.with_name(path.name + "-wal")
        logged = wal.is_file() and wal.stat().st_size > 0  # (WAL: the data may be there)
        if path.is_file() and path.stat().st_size == 0 and not logged:
            # SQLite takes an empty file for an empty database: triage said "0 bugs" beside
            # the bundles in bugs/ (and opening it wrote a schema into it)
            raise UsageError(
                f"{path}: an empty file (0 bytes), not a campaign database; restore it or "
                "start a new --out"
            )
        try:
            store = cls(path)
            store.db.execute("SELECT COUNT(*) FROM tests").fetchone()
        except sqlite3.DatabaseError as e:
            if "locked" in str(e):
                raise UsageError(
                    f"{path} is locked by another process; wait for it to finish"
                ) from None
            if not _writable(path.parent) or (path.exists() and not _writable(path)):
                raise UsageError(
                    f"{path.parent}: read-only (SQLite writes campaign.db's journal beside "
                    "it, even to read it); make the folder writable or copy it elsewhere"
                ) from None
            raise UsageError(
                f"{path}: not a readable campaign database ({e}); restore it or start a new --out"
            ) from None
        return store

    def close(self) -> None:
        self.commit()
        self.db.close()

    # --- campaign options ----------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_meta(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    # --- tests ---------------------------------------------------------------------
    def done_ids(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT id FROM tests")}

    def bug_keys(self) -> set[str]:
        """The keys of every bug, the reference's own failures included."""
        rows = self.db.execute("SELECT key FROM bugs UNION SELECT key FROM reference_bugs")
        return {r[0] for r in rows}

    def bug_of_signature(self, signature: str) -> str | None:
        """The bug an earlier hit of this signature was filed under, if any."""
        row = self.db.execute(
            "SELECT bug FROM results WHERE signature=? AND bug IS NOT NULL LIMIT 1", (signature,)
        ).fetchone()
        return row[0] if row else None

    def crash_keys(self, backend: str, verdict: str = "crash") -> list[tuple[str, str, str]]:
        """(key, signature, pattern) of the ``verdict`` bugs of ``backend`` (crashes, or
        timeouts), the first found first."""
        rows = self.db.execute(
            "SELECT key, signature, pattern FROM bugs WHERE backend=? AND verdict=? "
            "ORDER BY first_test",
            (backend, verdict),
        )
        return [(k, s, p) for k, s, p in rows]

    def merge_bug(self, old: str, into: str, why: str = "same crash") -> str:
        """Bug ``old`` made part of bug ``into`` (the same crash, reduced further there; or,
        ``why="follows"``, a crash shown to follow ``into``'s wrong result): its tests
        count for ``into``, its signature, where another, becomes one of ``into``'s joined
        crashes (``FOLLOW_UPS``, ``why``), with those joined to ``old``; its row goes.
        Returns ``old``'s bundle id (its folder is the caller's to remove)."""
        cols = "id, signature, pattern, first_test, first_seen, hits, seeds"
        was = self.db.execute(f"SELECT {cols} FROM bugs WHERE key=?", (old,)).fetchone()
        now = self.db.execute(f"SELECT {cols} FROM bugs WHERE key=?", (into,)).fetchone()
        assert was is not None and now is not None, (old, into)
        old_id, old_sig, old_pattern, first, seen, hits, old_seeds = was
        into_sig, into_seeds = now[1], json.loads(now[6])
        their_seeds = json.loads(old_seeds)
        seeds = [*into_seeds, *their_seeds][:MAX_SEEDS]
        self.db.execute("UPDATE results SET bug=? WHERE bug=?", (into, old))
        self.db.execute(
            "UPDATE bugs SET hits=hits+?, seeds=?, first_test=MIN(first_test, ?), "
            "first_seen=MIN(first_seen, ?) WHERE key=?",
            (hits, json.dumps(seeds), first, seen, into),
        )
        self.db.execute("DELETE FROM bugs WHERE key=?", (old,))
        joined = self.get_meta(FOLLOW_UPS) or {}
        theirs = joined.pop(old, {})
        mine = joined.setdefault(into, {})
        if old_sig != into_sig:
            seed = their_seeds[0] if their_seeds else None
            mine.setdefault(old_sig, {"ops": old_pattern.split("+"), "seed": seed, "why": why})
        for sig, entry in theirs.items():
            if sig != into_sig:
                mine.setdefault(sig, entry)
        if not mine:
            del joined[into]
        self.set_meta(FOLLOW_UPS, joined)
        stopped = self.get_meta(REDUCTION_STOPPED) or {}
        if stopped.pop(old, None) is not None:
            self.set_meta(REDUCTION_STOPPED, stopped)
        return old_id

    def hits_of(self, signature: str) -> int:
        """Tests stored with a result of this signature."""
        row = self.db.execute("SELECT COUNT(*) FROM results WHERE signature=?", (signature,))
        return row.fetchone()[0]

    def keys_of(self, signature: str) -> list[str]:
        rows = self.db.execute(
            "SELECT key FROM bugs WHERE signature=? ORDER BY first_test", (signature,)
        )
        return [r[0] for r in rows]

    def record(
        self,
        test_id: int,
        seed: int,
        ops: list[str],
        opset: int,
        seconds: float,
        backend_seconds: float,
        results: list[Result],
        guide: tuple[Any, bytes] | None = None,
    ) -> list[str]:
        """Store one test, committed now or with the batch it joins (``batch_seconds``);
        returns the bug keys seen for the first time. ``guide``: the guide's decision for
        the test and its reward keys (``onnxfuzz.run.steer``), stored with it."""
        new: list[str] = []
        now = time.time()
        if not self.db.in_transaction:
            self.db.execute("BEGIN")
            self._batch_began = time.perf_counter()
        # A savepoint: a test that fails half-way leaves no trace, and the batch goes on.
        self.db.execute("SAVEPOINT test")
        try:
            self.db.execute(
                "INSERT INTO tests VALUES (?, ?, ?, ?, ?, ?, ?)",
                (test_id, seed, json.dumps(ops), opset, seconds, backend_seconds, now),
            )
            if guide is not None:
                self.db.execute(
                    "INSERT INTO guide VALUES (?, ?, ?)",
                    (test_id, json.dumps(guide[0], sort_keys=True), guide[1]),
                )
            for r in results:
                self.db.execute(
                    "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (test_id, r.backend, r.verdict, r.stage, r.signature, r.bug, r.detail),
                )
                if r.bug is None:
                    continue
                table = "reference_bugs" if r.pattern == REFERENCE_ONLY else "bugs"
                row = self.db.execute(f"SELECT seeds FROM {table} WHERE key=?", (r.bug,)).fetchone()
                if row is None:
                    self.db.execute(
                        f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
                        (
                            r.bug,
                            r.signature,
                            bug_id(r.bug, self.names),
                            r.verdict,
                            r.stage,
                            r.backend,
                            r.suspect,
                            r.pattern,
                            test_id,
                            now,
                            json.dumps([seed]),
                        ),
                    )
                    new.append(r.bug)
                else:
                    seeds = json.loads(row[0])
                    if len(seeds) < MAX_SEEDS:
                        seeds.append(seed)
                    self.db.execute(
                        f"UPDATE {table} SET hits=hits+1, seeds=? WHERE key=?",
                        (json.dumps(seeds), r.bug),
                    )
        except BaseException:
            self.db.execute("ROLLBACK TO test")
            self.db.execute("RELEASE test")
            raise
        self.db.execute("RELEASE test")
        self.commit_due()
        return new

    def guide_rows(self) -> dict[int, tuple[Any, bytes]]:
        """Every stored test's guide decision and reward keys (tests stored without: none)."""
        rows = self.db.execute("SELECT test_id, decision, keys FROM guide")
        return {i: (json.loads(d), bytes(k)) for i, d, k in rows}

    def decision_of(self, test_id: int) -> Any:
        row = self.db.execute("SELECT decision FROM guide WHERE test_id=?", (test_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def verdicts_of(self, test_id: int) -> dict[str, str]:
        """A stored test's verdict per backend."""
        rows = self.db.execute("SELECT backend, verdict FROM results WHERE test_id=?", (test_id,))
        return dict(rows.fetchall())

    # --- optimization coverage (the adapters' ``optimizations`` feedback) -----------
    def add_feedback(
        self,
        test_id: int,
        backend: str,
        fired: dict[str, tuple[str, ...]],
        known: dict[str, tuple[str, ...]],
    ) -> None:
        """What ``backend``'s optimizer did on test ``test_id`` (kind -> names fired) and
        what it could have done (kind -> names that ran without firing too), written after
        the test's ``record`` so that both commit together."""
        for kind, names in fired.items():
            for name in names:
                self.db.execute(
                    "INSERT INTO optimizations VALUES (?, ?, ?, 1, ?) ON CONFLICT DO UPDATE "
                    "SET tests=tests+1, first_test=COALESCE(first_test, excluded.first_test)",
                    (backend, kind, name, test_id),
                )
        for kind, names in known.items():
            self.db.executemany(
                "INSERT OR IGNORE INTO optimizations VALUES (?, ?, ?, 0, NULL)",
                [(backend, kind, name) for name in names],
            )

    def add_feedback_cost(
        self, backend: str, backend_s: float, feedback_s: float, error: str = ""
    ) -> None:
        """One test's backend time and the part of it its feedback hook took."""
        self.db.execute(
            "INSERT INTO feedback_cost VALUES (?, 1, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET "
            "tests=tests+1, backend_seconds=backend_seconds+excluded.backend_seconds, "
            "feedback_seconds=feedback_seconds+excluded.feedback_seconds, "
            "errors=errors+excluded.errors, last_error=CASE WHEN excluded.errors THEN "
            "excluded.last_error ELSE last_error END",
            (backend, backend_s, feedback_s, int(bool(error)), error),
        )

    def optimizations(self) -> list[tuple[str, str, str, int, int | None]]:
        """(backend, kind, name, tests it fired in, first such test), every one known."""
        rows = self.db.execute(
            "SELECT backend, kind, name, tests, first_test FROM optimizations "
            "ORDER BY backend, kind, tests DESC, name"
        )
        return rows.fetchall()

    def feedback_costs(self) -> dict[str, tuple[int, float, float, int, str]]:
        """backend -> (tests, backend seconds, feedback seconds, hook errors, last error)."""
        rows = self.db.execute("SELECT * FROM feedback_cost")
        return {r[0]: tuple(r[1:]) for r in rows.fetchall()}

    # --- diversity over time --------------------------------------------------------
    def add_diversity_snapshot(self, tests: int, summary: dict[str, Any]) -> None:
        """The diversity figures after ``tests`` tests (written with the tests it counts;
        a resume that counts the same tests again replaces the row)."""
        self.db.execute(
            "INSERT OR REPLACE INTO diversity_history VALUES (?, ?, ?)",
            (tests, time.time(), json.dumps(summary, sort_keys=True)),
        )

    # --- summaries -----------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT verdict, COUNT(*) FROM results GROUP BY verdict"))

    def counts_by_backend(self) -> dict[tuple[str, str], int]:
        rows = self.db.execute(
            "SELECT backend, verdict, COUNT(*) FROM results GROUP BY backend, verdict"
        )
        return {(b, v): n for b, v, n in rows}

    def unsupported_reasons(self) -> list[tuple[str, str, int]]:
        """(backend, error text, tests) of the tests a backend did not support, most first."""
        rows = self.db.execute(
            "SELECT backend, detail, COUNT(*) FROM results WHERE verdict = 'unsupported' "
            "GROUP BY backend, detail"
        )
        return [(b, d or "", n) for b, d, n in rows]

    def n_tests(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM tests").fetchone()[0]

    def bugs(self) -> list[dict[str, Any]]:
        rows = self.db.execute(f"SELECT {', '.join(BUG_COLUMNS)} FROM bugs ORDER BY first_test")
        return [dict(zip(BUG_COLUMNS, r, strict=True)) for r in rows]

    def reference_bugs(self) -> list[dict[str, Any]]:
        """Failures of the reference alone (one reference, one target), not bugs' rows."""
        rows = self.db.execute(
            f"SELECT {', '.join(BUG_COLUMNS)} FROM reference_bugs ORDER BY first_test"
        )
        return [dict(zip(BUG_COLUMNS, r, strict=True)) for r in rows]

    def follow_ups(self) -> dict[str, list[dict[str, Any]]]:
        """Bug key -> the crashes joined to it (``FOLLOW_UPS``): each one's signature, the
        ops of its reduced model, its first seed and the tests it showed in; and a
        state-dependent bug's other signatures (``why``: "same state", no ops: not reduced)."""
        joined = self.get_meta(FOLLOW_UPS) or {}
        out: dict[str, list[dict[str, Any]]] = {}
        for key, crashes in joined.items():
            rows = self.db.execute(
                "SELECT signature, COUNT(*) FROM results WHERE bug=? GROUP BY signature", (key,)
            )
            hits = dict(rows.fetchall())
            out[key] = [
                {"signature": sig, **c, "hits": hits.get(sig, 0)} for sig, c in crashes.items()
            ]
        state = self.db.execute("SELECT key, signature FROM bugs WHERE pattern=?", (STATE,))
        for key, sig in state.fetchall():
            mine = out.setdefault(key, [])
            named = {c["signature"] for c in mine} | {sig}
            rows = self.db.execute(
                "SELECT r.signature, COUNT(*), MIN(t.seed) FROM results r JOIN tests t "
                "ON t.id = r.test_id WHERE r.bug=? GROUP BY r.signature ORDER BY MIN(t.id)",
                (key,),
            )
            mine += [
                {"signature": s, "ops": [], "seed": seed, "why": "same state", "hits": n}
                for s, n, seed in rows
                if s not in named
            ]
            if not mine:
                del out[key]
        return out

    def not_reproducible(self) -> int:
        """Findings that no fresh run re-created (never filed)."""
        row = self.db.execute("SELECT COUNT(*) FROM results WHERE verdict=?", (NOT_REPRODUCIBLE,))
        return row.fetchone()[0]

    def not_reproducible_of(self, signature: str) -> int:
        """Findings of this signature that no fresh run re-created."""
        row = self.db.execute(
            "SELECT COUNT(*) FROM results WHERE verdict=? AND signature=?",
            (NOT_REPRODUCIBLE, signature),
        )
        return row.fetchone()[0]


def _writable(path: Path) -> bool:
    """Whether a file can be written in folder ``path`` (or file ``path`` opened for writing),
    tried for real: ``os.access`` says yes to root on a read-only or immutable folder."""
    try:
        if path.is_dir():
            probe = path / f".onnxfuzz-write-test-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        else:
            with open(path, "r+b"):
                pass
    except OSError:
        return False
    return True


class CampaignLock:
    """One campaign process per folder: an exclusive lock on ``DIR/campaign.lock`` for the
    campaign's life (two processes writing one campaign.db would count tests twice)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "campaign.lock"
        self._fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            raise UsageError(
                f"--out: {folder} is in use by another onnxfuzz fuzz (it holds {self.path}); "
                "wait for it or stop it first"
            ) from None

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = -1
