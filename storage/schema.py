"""The database schema as SQLAlchemy Core tables (no ORM: the CLI starts faster without it).

Beside these tables, a PostgreSQL database holds one function, `learning_bot_record_runs`
(migration 0009, replaced by 0010 to insert the cache write and by 0016 to check the learner's
phase and settings): the write of observed runs into traces, trace_arms, posteriors and
run_stats.
A migration makes it, so a change to that write is a new migration replacing it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

# BIGINT primary keys are not rowid aliases in SQLite; INTEGER is, and is 64-bit there anyway.
Id = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _posterior_columns() -> list[Column[Any]]:
    """An arm's posterior as posteriors holds it and reset_snapshots keeps it (new Column
    objects on each call: a Column belongs to one table)."""
    return [
        Column("alpha", Float, nullable=False),
        Column("beta", Float, nullable=False),
        Column("pulls", Integer, nullable=False),
        Column("last_updated", BigInteger, nullable=True),
        Column("prior_alpha", Float, nullable=False),
        Column("prior_beta", Float, nullable=False),
        Column("prior_pulls", Integer, nullable=False),
        Column("epoch", Integer, nullable=False),
        # traces up to this id predate the arm's last reset; bootstrapping leaves them out
        Column("reset_trace_pk", BigInteger, nullable=False),
    ]


def _reward_columns() -> list[Column[Any]]:
    """The rewards an arm has received since its last reset, as recorded (never decayed by
    forgetting): totalReward and accuracy read this. prior_rewards is the part its base holds,
    as prior_pulls is for pulls (migration 0007)."""
    return [
        Column("rewards", Float, nullable=False, server_default="0"),
        Column("prior_rewards", Float, nullable=False, server_default="0"),
    ]


learners = Table(
    "learners",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", String(128), nullable=False, unique=True),
    Column("phase", String(16), nullable=False),
    # counters of new traces go to stats_epoch; a full reset starts a new one
    Column("stats_epoch", Integer, nullable=False),
    # status counts traces of this epoch and later
    Column("status_from_epoch", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    # Forgetting: observations of an arm over which its evidence halves (0: never forget).
    Column("half_life", Float, nullable=False, server_default="0"),
    # The learner's learning options as JSON (LearningConfig.to_dict without the phase), set
    # when it is created and by the settings command only (migration 0012); NULL for a learner
    # made before: the opening process's settings apply to it.
    Column("settings", Text, nullable=True),
    # The projection (engine.projection, JSON) shown when the learner was last switched to
    # active, and when it was kept: status shows what is achieved beside it (migration 0019).
    Column("projection", Text, nullable=True),
    Column("projected_at", BigInteger, nullable=True),
)

# The current posterior of one arm: prior_* (its base since the last reset) plus the changes
# recorded in its current epoch. On PostgreSQL its pages are filled to half (migration 0008),
# so that the row versions each observe writes stay on their page.
posteriors = Table(
    "posteriors",
    metadata,
    Column("learner_id", Id, ForeignKey("learners.id"), nullable=False),
    Column("arm_id", String(512), nullable=False),
    # a small number naming the arm within its learner: trace outcomes store this, not the id
    Column("arm_key", Integer, nullable=False),
    Column("label", String(512), nullable=False),
    Column("token_cost", Integer, nullable=False),
    *_posterior_columns(),
    # When the row was made: what lastUpdated shows until the first update (migration 0006).
    Column("created_at", BigInteger, nullable=True),
    *_reward_columns(),
    PrimaryKeyConstraint("learner_id", "arm_id"),
    UniqueConstraint("learner_id", "arm_key", name="uq_posteriors_learner_arm_key"),
)

traces = Table(
    "traces",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("learner_id", Id, ForeignKey("learners.id"), nullable=False),
    Column("trace_id", String(256), nullable=False),
    Column("run_id", String(256), nullable=False),
    Column("session_id", String(256), nullable=False),
    Column("session_key", String(256), nullable=False),
    Column("channel", String(256), nullable=False),
    Column("conversation", String(256), nullable=False),
    Column("timestamp", BigInteger, nullable=False),
    Column("provider", String(256), nullable=False),
    Column("model", String(256), nullable=False),
    Column("is_baseline", Boolean, nullable=False),
    Column("phase", String(16), nullable=False),
    Column("guard", String(32), nullable=True),
    Column("usage_input", BigInteger, nullable=False),
    Column("usage_output", BigInteger, nullable=False),
    Column("usage_cache_read", BigInteger, nullable=False),
    Column("usage_cache_write", BigInteger, nullable=False, server_default="0"),
    Column("usage_total", BigInteger, nullable=False),
    Column("duration_ms", BigInteger, nullable=False),
    Column("system_prompt_chars", BigInteger, nullable=False),
    Column("aborted", Boolean, nullable=False),
    Column("error", Text, nullable=True),
    Column("context", Text, nullable=False),
    Column("stats_epoch", Integer, nullable=False),
    Column("bootstrapped", Boolean, nullable=False),
    UniqueConstraint("learner_id", "trace_id"),
    Index("ix_traces_learner_time", "learner_id", "timestamp"),
    Index("ix_traces_learner_conversation", "learner_id", "conversation", "timestamp"),
)

# One arm's outcome in one trace (the arm by its arm_key in the trace's learner). A row with a
# reward is an automatic posterior change (or, on a passive trace, a bootstrapped one) of the
# arm's posterior in `epoch`. trace_pk is the trace's id, with no foreign key (migration 0008):
# outcomes are written only in the write that stores their trace, and deleted before it.
trace_arms = Table(
    "trace_arms",
    metadata,
    Column("trace_pk", Id, nullable=False),
    Column("arm_key", Integer, nullable=False),
    Column("included", Boolean, nullable=False),
    Column("referenced", Boolean, nullable=False),
    Column("token_cost", Integer, nullable=False),
    Column("reward", Float, nullable=True),
    Column("epoch", Integer, nullable=True),
    # The arm's pull count once this change was applied: the order `db verify` replays.
    Column("seq", Integer, nullable=True),
    PrimaryKeyConstraint("trace_pk", "arm_key"),
    sqlite_with_rowid=False,
)

# Manual (lagged) posterior changes with who gave them and why. The posterior_changes view
# shows these and the automatic ones together.
observations = Table(
    "observations",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("learner_id", Id, ForeignKey("learners.id"), nullable=False),
    Column("arm_id", String(512), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("reward", Float, nullable=False),
    Column("source", String(16), nullable=False),
    Column("lagged", Boolean, nullable=False),
    Column("actor", String(256), nullable=True),
    Column("reason", Text, nullable=True),
    Column("trace_pk", Id, ForeignKey("traces.id", ondelete="SET NULL"), nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("seq", Integer, nullable=True),
    Index("ix_observations_arm_epoch", "learner_id", "arm_id", "epoch"),
)

# Run counters, sharded so concurrent writers rarely touch the same row; the sum of `changes`
# is the learner's version (caches compare it to know when to reload).
run_stats = Table(
    "run_stats",
    metadata,
    Column("learner_id", Id, ForeignKey("learners.id"), nullable=False),
    Column("stats_epoch", Integer, nullable=False),
    Column("shard", Integer, nullable=False),
    Column("trace_count", BigInteger, nullable=False),
    Column("total_tokens", BigInteger, nullable=False),
    Column("min_ts", BigInteger, nullable=True),
    Column("max_ts", BigInteger, nullable=True),
    Column("baseline_runs", BigInteger, nullable=False),
    Column("baseline_tokens", BigInteger, nullable=False),
    Column("baseline_duration", BigInteger, nullable=False),
    Column("selected_runs", BigInteger, nullable=False),
    Column("selected_tokens", BigInteger, nullable=False),
    Column("selected_duration", BigInteger, nullable=False),
    Column("changes", BigInteger, nullable=False),
    # Selected runs: token costs of every arm offered, and of the arms that went in.
    Column("offered_prompt_tokens", BigInteger, nullable=False, server_default="0"),
    Column("selected_prompt_tokens", BigInteger, nullable=False, server_default="0"),
    PrimaryKeyConstraint("learner_id", "stats_epoch", "shard"),
)

# A reset, with the state it replaced in reset_snapshots; undone resets keep their row.
resets = Table(
    "resets",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("learner_id", Id, ForeignKey("learners.id"), nullable=False),
    Column("all_arms", Boolean, nullable=False),
    Column("arm_ids", Text, nullable=False),
    Column("actor", String(256), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("previous_status_from_epoch", Integer, nullable=False),
    Column("undone_at", BigInteger, nullable=True),
    Column("undone_by", String(256), nullable=True),
)

reset_snapshots = Table(
    "reset_snapshots",
    metadata,
    Column("reset_id", Id, ForeignKey("resets.id", ondelete="CASCADE"), nullable=False),
    Column("arm_id", String(512), nullable=False),
    *_posterior_columns(),
    *_reward_columns(),
    PrimaryKeyConstraint("reset_id", "arm_id"),
)

# Phase changes, resets and every mutating chat command, with who did it.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("learner_id", Id, ForeignKey("learners.id"), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("actor", String(256), nullable=False),
    Column("surface", String(64), nullable=False),
    Column("detail", Text, nullable=False),
    Column("result", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_audit_learner_id", "learner_id", "id"),
)

# Idempotency keys of chat commands and the reply their first execution gave.
command_results = Table(
    "command_results",
    metadata,
    Column("key", String(256), primary_key=True),
    Column("reply", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_command_results_created", "created_at"),
)

# A destructive command waiting for its confirm/cancel click; used exactly once.
confirmations = Table(
    "confirmations",
    metadata,
    Column("token", String(64), primary_key=True),
    Column("learner", String(128), nullable=False),
    Column("actor_id", String(256), nullable=False),
    Column("surface", String(64), nullable=False),
    Column("command", Text, nullable=False),
    Column("summary", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("used_at", BigInteger, nullable=True),
    Column("used_by", String(256), nullable=True),
    Column("outcome", Text, nullable=True),
)

# Fixed-window counters of mutating chat commands per actor, shared by every replica.
rate_limits = Table(
    "rate_limits",
    metadata,
    Column("key", String(300), primary_key=True),
    Column("window_start", BigInteger, nullable=False),
    Column("count", Integer, nullable=False),
)

# Session-stable selection (docs/sessions.md): what a session's first select decided, grown
# since. `included` and `left_out` are JSON arrays of arm ids (`included` in prompt order);
# `used_at` is the last select (the idle window counts from it) and `version` the compare-and-set
# counter of appends. Rows idle longer than a day are deleted as new sessions start.
session_sets = Table(
    "session_sets",
    metadata,
    Column("learner_id", Id, ForeignKey("learners.id"), nullable=False),
    Column("session_key", String(256), nullable=False),
    Column("included", Text, nullable=False),
    Column("left_out", Text, nullable=False),
    Column("is_baseline", Boolean, nullable=False),
    Column("decided_at", BigInteger, nullable=False),
    Column("used_at", BigInteger, nullable=False),
    Column("version", Integer, nullable=False),
    # the hashed word features of the session's opening message (migration 0018; JSON, never
    # the text): a later run of the session learns under them (engine.context)
    Column("opening", Text, nullable=True),
    # the set's decision (migration 0020): selects answered from the current draw, redraws while
    # live, the last decision's reason, and the rest as JSON (engine.session_sets.SessionSet:
    # provisional, added, wanted, provider, model, broken, prompt_tokens, reviewed)
    Column("turns", Integer, nullable=True),
    Column("redraws", Integer, nullable=True),
    Column("reason", String(64), nullable=True),
    Column("decision", Text, nullable=True),
    PrimaryKeyConstraint("learner_id", "session_key"),
    Index("ix_session_sets_used", "learner_id", "used_at"),
)

# Proactive messages (migration 0014). A channel's subscription to a learner's alerts, digests
# or changes, with who made it; a channel the bot could not post to is paused with the reason.
alert_subscriptions = Table(
    "alert_subscriptions",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("surface", String(64), nullable=False),
    Column("channel", String(256), nullable=False),
    # the workspace or guild the channel belongs to (its time zone, its bot token)
    Column("scope", String(256), nullable=False),
    Column("learner", String(128), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("created_by", String(256), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("paused_at", BigInteger, nullable=True),
    Column("paused_reason", Text, nullable=True),
    # an IANA time zone for digests when the platform gave one; NULL: UTC
    Column("timezone", String(64), nullable=True),
    UniqueConstraint("surface", "channel", "learner", "kind", name="uq_alert_subscriptions_target"),
)

# One alert of one learner (`alert` is the rule and its subject, e.g. starvation:tool:web):
# firing or resolved, the episode it is in (a new firing after a resolution is a new episode),
# and the numbers behind its latest evaluation as JSON.
alert_states = Table(
    "alert_states",
    metadata,
    Column("learner", String(128), nullable=False),
    Column("alert", String(600), nullable=False),
    Column("state", String(16), nullable=False),
    Column("episode", Integer, nullable=False),
    Column("first_seen", BigInteger, nullable=False),
    Column("last_seen", BigInteger, nullable=False),
    Column("resolved_at", BigInteger, nullable=True),
    Column("detail", Text, nullable=False),
    PrimaryKeyConstraint("learner", "alert"),
)

# Each proactive message owed to one channel, claimed before it is sent (the claim is what makes
# it sent once across replicas and restarts): an alert episode's card and its resolution, or a
# digest of one period. `ref` is the platform's message id (Slack ts, Discord message id): the
# card is edited in place and follow-ups go in its thread.
alert_messages = Table(
    "alert_messages",
    metadata,
    Column("subscription_id", Id, nullable=False),
    Column("alert", String(600), nullable=False),
    Column("episode", Integer, nullable=False),
    Column("stage", String(16), nullable=False),
    Column("claimed_by", String(128), nullable=False),
    Column("claimed_at", BigInteger, nullable=False),
    Column("sent_at", BigInteger, nullable=True),
    Column("ref", String(256), nullable=True),
    Column("error", Text, nullable=True),
    PrimaryKeyConstraint("subscription_id", "alert", "episode", "stage"),
    Index("ix_alert_messages_sent", "subscription_id", "sent_at"),
)

# Named leases: the replica holding `alerts` evaluates the rules and sends, until it expires.
alert_leases = Table(
    "alert_leases",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", String(128), nullable=False),
    Column("expires_at", BigInteger, nullable=False),
)

# The context-aware policy's per-feature evidence (docs/context.md, engine.context_policy):
# per learner, per hashed feature (a message word, the previous tool, the channel, the model),
# per arm, the rewards and runs seen under it as of observation `tick` (forgetting decays them
# from there). The row with feature 0 and arm_id "" holds the learner's observation count.
context_evidence = Table(
    "context_evidence",
    metadata,
    Column("learner_id", Id, ForeignKey("learners.id"), nullable=False),
    Column("feature", BigInteger, nullable=False),
    Column("arm_id", String(512), nullable=False),
    Column("rewards", Float, nullable=False),
    Column("runs", Float, nullable=False),
    Column("tick", BigInteger, nullable=False),
    PrimaryKeyConstraint("learner_id", "feature", "arm_id"),
    Index("ix_context_evidence_tick", "learner_id", "tick"),
)

# The forms a learner's message word features were written in (engine.feature_words): per
# learner, per word feature (its hash, as in context_evidence), per form (one lower-cased word,
# never a message), how often it was seen; explanations name the feature by the most common.
context_words = Table(
    "context_words",
    metadata,
    Column("learner_id", Id, ForeignKey("learners.id"), nullable=False),
    Column("feature", BigInteger, nullable=False),
    Column("word", String(64), nullable=False),
    Column("seen", BigInteger, nullable=False),
    PrimaryKeyConstraint("learner_id", "feature", "word"),
)

# The recall target's calibration (engine.recall_target, engine.recall_levels; migration 0022):
# per learner, the uses its baseline sessions recorded, in the order they were stored (`id`),
# each an arm's level at the session's opening (NULL: a level no set reaches), its own level,
# and the session's key. Every replica appends; each reads the latest back; the older go.
recall_levels = Table(
    "recall_levels",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("learner_id", Id, ForeignKey("learners.id"), nullable=False),
    Column("level", Float, nullable=True),
    Column("own", Float, nullable=True),
    Column("session_key", String(256), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_recall_levels_learner", "learner_id", "id"),
)
