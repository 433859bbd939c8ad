"""The spool's line format: one JSON line per spooled item, naming its learner (its id, and
its name when known) so that it replays into a database restored or created again, where
learner ids differ. A run's line is the record's JSON (engine.records' codec) beside the
learner; a per-arm outcome's and a line of per-feature evidence carry a kind (`"k"`) and their
body under one key. Lines written by earlier versions (snake_case keys, arms as lists, no
learner name) read the same."""

from __future__ import annotations

import json
from typing import Any

from learning_bot.engine.config import Phase
from learning_bot.engine.records import RunRecord, record_from_json, record_to_json
from learning_bot.engine.store_records import PendingArmOutcome, PendingEvidence


def spool_line(learner_id: int, record: RunRecord, name: str | None = None) -> str:
    """One spool line: the learner's name and id (0 for a learner storage has not opened
    yet) and the record's JSON (engine.records' codec). Replay goes by the name when there is
    one; the id is what lines of earlier versions carry alone."""
    head: dict[str, Any] = {"l": learner_id} if name is None else {"l": learner_id, "n": name}
    return json.dumps({**head, **record_to_json(record)}, separators=(",", ":"), allow_nan=False)


OUTCOME_PREFIX = '{"k":"arm",'
"""How a per-arm outcome's line starts (a run's line starts with `{"l":`)."""

EVIDENCE_PREFIX = '{"k":"ev",'
"""How a line of per-feature evidence starts (`PendingEvidence`)."""

Spooled = RunRecord | PendingArmOutcome | PendingEvidence


def _tagged_line(kind: str, learner_id: int, name: str | None, field: str, body: Any) -> str:
    """A spool line that is not a run: its kind, the learner's id and name, and its body."""
    head: dict[str, Any] = {"k": kind, "l": learner_id}
    if name is not None:
        head["n"] = name
    return json.dumps({**head, field: body}, separators=(",", ":"), allow_nan=False)


def _read_tagged_line(line: str, field: str) -> tuple[int, str | None, Any]:
    """A `_tagged_line`'s learner id, learner name and body (ValueError when malformed)."""
    data: dict[str, Any] = json.loads(line)
    return (*_learner(data), data[field])


def _learner(data: dict[str, Any]) -> tuple[int, str | None]:
    """The learner id and learner name (None in lines of earlier versions) of a spool line."""
    name = data.get("n")
    if name is not None and not isinstance(name, str):
        raise ValueError("the learner name of a spool line must be a string")
    return int(data["l"]), name


def evidence_line(learner_id: int, pending: PendingEvidence, name: str | None = None) -> str:
    """One spool line holding the per-feature evidence of observed runs (`PendingEvidence`):
    hashed features and rewards, never a message."""
    body = {
        "runs": [[list(fs), [list(r) for r in rewards]] for fs, rewards in pending.runs],
        "keep": pending.keep,
        "max": pending.max_cells,
        "d": [list(d) for d in pending.deferrals],
        "phase": pending.phase.value,
    }
    return _tagged_line("ev", learner_id, name, "e", body)


def _reward(value: Any) -> float:
    reward = float(value)
    if not 0.0 <= reward <= 1.0:  # NaN included
        raise ValueError("a spooled reward must be in [0, 1]")
    return reward


def read_evidence_line(line: str) -> tuple[int, str | None, PendingEvidence]:
    learner_id, name, e = _read_tagged_line(line, "e")
    runs = tuple(
        (
            tuple(int(f) for f in features),
            tuple((str(arm), _reward(reward)) for arm, reward in rewards),
        )
        for features, rewards in e["runs"]
    )
    deferrals = tuple((str(arm), int(d), int(n)) for arm, d, n in e["d"])
    keep = float(e["keep"])
    if not 0.0 < keep <= 1.0:
        raise ValueError("the evidence's keep factor must be in (0, 1]")
    pending = PendingEvidence(runs, keep, int(e["max"]), deferrals, Phase(e["phase"]))
    return learner_id, name, pending


def outcome_line(learner_id: int, pending: PendingArmOutcome, name: str | None = None) -> str:
    """One spool line holding a per-arm outcome (`PendingArmOutcome`)."""
    body = {
        "arm": pending.arm_id,
        "r": pending.reward,
        "ref": pending.referenced,
        "c": pending.conversation,
        "apply": pending.apply_reward,
        "at": pending.at,
        "key": pending.key,
        "phase": pending.phase.value,
    }
    if pending.loaded:
        body["loaded"] = True
    return _tagged_line("arm", learner_id, name, "o", body)


def read_outcome_line(line: str) -> tuple[int, str | None, PendingArmOutcome]:
    learner_id, name, o = _read_tagged_line(line, "o")
    conversation = o["c"]
    if conversation is not None and not isinstance(conversation, str):
        raise ValueError("the conversation of a spooled outcome must be a string")
    pending = PendingArmOutcome(
        str(o["arm"]),
        _reward(o["r"]),
        bool(o["ref"]),
        conversation,
        bool(o["apply"]),
        int(o["at"]),
        str(o["key"]),
        Phase(o["phase"]),
        o.get("loaded") is True,
    )
    return learner_id, name, pending


def read_spool_line(line: str) -> tuple[int, RunRecord]:
    """The learner id and record of a spool line, validated by the codec (lines written by
    earlier versions, with snake_case keys and arms as lists, read the same)."""
    learner_id, _name, record = read_named_line(line)
    return learner_id, record


def read_named_line(line: str) -> tuple[int, str | None, RunRecord]:
    """The learner id, learner name (None in lines of earlier versions) and record of a spool
    line."""
    data: dict[str, Any] = json.loads(line)
    return (*_learner(data), record_from_json(data))


def read_line(line: str) -> tuple[int, str | None, Spooled]:
    """The learner id, learner name and item of any spool line (ValueError, KeyError or
    TypeError when malformed)."""
    if line.startswith(OUTCOME_PREFIX):
        return read_outcome_line(line)
    if line.startswith(EVIDENCE_PREFIX):
        return read_evidence_line(line)
    return read_named_line(line)


def line_of(learner_id: int, item: Spooled, name: str | None) -> str:
    """The spool line of any spooled item."""
    if isinstance(item, PendingArmOutcome):
        return outcome_line(learner_id, item, name)
    if isinstance(item, PendingEvidence):
        return evidence_line(learner_id, item, name)
    return spool_line(learner_id, item, name)


def line_key(line: str) -> tuple[str, str]:
    """(the learner: its name, else its id; the trace id, or a per-arm outcome's key) of a
    spool line."""
    try:
        data = json.loads(line)
        learner = data.get("n") or f"#{int(data.get('l', 0))}"
        if data.get("k") == "arm":
            return str(learner), str(data["o"]["key"])
        return str(learner), str(data.get("traceId", data.get("trace_id", line)))
    except (ValueError, TypeError, AttributeError):
        return "", line
