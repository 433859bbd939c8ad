"""A scripted agent through `LearningClient` against a real `learning-bot serve`: sessions of
several turns, each turn a select with the request's message and an observe that sends only
what the model did (tool calls, texts). The client carries the select's session key and
context to the observe by itself, so the learner learns what each tool's use depends on;
a call that names its arm credits that arm only; a bare name two included arms share credits
neither and is answered as ambiguous; and a tool the model found through tool search and
used is reported loaded, and joins its session's set."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from learning_bot.client import ArmSpec, LearningClient, ObserveResult, Selection
from tests.e2e.launch import LEARNING_BOT, Served, environment, served

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BILLING = "tool:billing:calculate"
TRAVEL = "tool:travel:calculate"
FORECAST = "tool:weather:forecast"
READ = "tool:fs:Read"


def tool(category: str, name: str, description: str) -> ArmSpec:
    schema = {
        "name": name,
        "description": description,
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    return ArmSpec.tool(name, schema, category)


ARMS = [
    tool("fs", "Read", "Read a file from the workspace"),
    tool(
        "weather",
        "forecast",
        "Weather forecast for a city: rain, wind, temperature. " + "Hourly and daily. " * 40,
    ),
    tool("billing", "calculate", "Calculate an invoice total with taxes"),
    tool("travel", "calculate", "Calculate a travel distance between two cities"),
    *(tool("misc", f"tool_{i:02d}", f"Miscellaneous helper number {i}") for i in range(8)),
]
SETTINGS = {
    "LEARNING_BOT_PHASE": "active",
    "LEARNING_BOT_BASELINE_RATE": "0",
    "LEARNING_BOT_MIN_PULLS": "1",
    # room for about half the inventory: the rest is left out, and deferred for tool search
    "LEARNING_BOT_TOKEN_BUDGET": str(sum(a.token_cost for a in ARMS) // 2),
}
RAIN = ("will it rain in Lyon tomorrow", "is rain expected in Paris on sunday")
INVOICE = ("what is the invoice total for march", "send the invoice total for april")
NOTES = ("summarise the notes in the readme", "list the open questions in the notes")
SESSIONS = [
    *((f"weather-{i}", [RAIN[0], RAIN[1], RAIN[0]]) for i in range(3)),
    *((f"billing-{i}", [INVOICE[0], INVOICE[1], INVOICE[0]]) for i in range(3)),
    # opened about notes: the forecast is likely left out, then needed
    *((f"notes-{i}", [NOTES[0], NOTES[1], RAIN[0], RAIN[1], RAIN[0]]) for i in range(4)),
]
"""Sessions of several turns; a session's opening message is among the features of each of
its runs, so the sessions open on different topics."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, dict[str, str]]]:
    root = tmp_path_factory.mktemp("client-agent")
    env = environment(root, SETTINGS)
    with served(env, "--host", "127.0.0.1", stdout=subprocess.DEVNULL, timeout=120) as live:
        yield live, env


def model_calls(message: str, selection: Selection) -> list[str | dict[str, str]]:
    """What the scripted model calls for a message: the forecast for rain (through tool
    search when the selection left it out), the billing tool, naming its arm, for an invoice,
    and Read otherwise."""
    reachable = set(selection.selected) | set(selection.deferred)
    if message in RAIN and FORECAST in reachable:
        return ["forecast"]
    if message in INVOICE:
        return [{"name": "calculate", "arm": BILLING}]
    return ["Read"]


def turn(client: LearningClient, session: str, message: str) -> tuple[Selection, ObserveResult]:
    selection = client.select(ARMS, session_key=session, context={"message": message})
    assert selection.fallback is None, selection.fallback
    calls = model_calls(message, selection)
    result = client.observe(selection, tool_calls=calls, texts=["done"])
    assert result is not None and result.recorded, result
    return selection, result


@pytest.fixture(scope="module")
def agent(
    server: tuple[Served, dict[str, str]],
) -> list[tuple[str, str, Selection, ObserveResult]]:
    live, _ = server
    turns = []
    with LearningClient(live.url, retries=5, timeout=60) as client:
        for name, messages in SESSIONS:
            for message in messages:
                session = f"agent:main:test:{name}"
                turns.append((session, message, *turn(client, session, message)))
    return turns


def test_what_a_tool_depends_on_is_learnt_without_resending_the_context(
    server: tuple[Served, dict[str, str]],
    agent: list[tuple[str, str, Selection, ObserveResult]],
) -> None:
    live, env = server
    shown = subprocess.run(
        [LEARNING_BOT, "status", "arm", FORECAST, "--url", live.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    depends = [line for line in shown.stdout.splitlines() if "Depends on" in line]
    assert depends, shown.stdout
    # a word of the messages (those the forecast serves, or those it is not used under: which
    # of them ranks first depends on the draws), never a word the context was not sent with
    sent = {message for _, messages in SESSIONS for message in messages}
    words = {w.lower() for message in sent for w in message.split() if len(w) > 3}
    named = {w for line in depends for w in words if f"the message mentions '{w}'" in line}
    assert named, shown.stdout


def both_calculators(client: LearningClient, session: str) -> Selection:
    """A select for an invoice turn, as the prompt that kept both calculate tools would have
    been sent: which arms a draw keeps is random, the run the observe reports is not."""
    selection = client.select(ARMS, session_key=session, context={"message": INVOICE[0]})
    return Selection(
        selected=(BILLING, TRAVEL),
        excluded=tuple(a.arm_id for a in ARMS if a.arm_id not in (BILLING, TRAVEL)),
        arms=selection.arms,
        session_key=session,
        context=selection.context,
    )


def test_a_call_naming_its_arm_credits_that_arm_only(
    server: tuple[Served, dict[str, str]],
    agent: list[tuple[str, str, Selection, ObserveResult]],
) -> None:
    live, _ = server
    with LearningClient(live.url, retries=5, timeout=60) as client:
        named = client.observe(
            both_calculators(client, "agent:main:test:named"),
            tool_calls=[{"name": "calculate", "arm": BILLING}],
            texts=["done"],
        )
    assert named is not None and named.recorded, named
    # and the agent's own invoice turns that happened to keep both
    both = [named] + [
        result
        for _, message, selection, result in agent
        if message in INVOICE and selection.keeps(BILLING) and selection.keeps(TRAVEL)
    ]
    for result in both:
        assert result.rewards[BILLING] == 1.0 and result.rewards[TRAVEL] == 0.0
        assert result.referenced[BILLING] is True and result.referenced[TRAVEL] is False
        assert result.ambiguous == {}


def test_a_bare_name_two_included_arms_share_credits_neither(
    server: tuple[Served, dict[str, str]],
) -> None:
    live, _ = server
    with LearningClient(live.url, retries=5, timeout=60) as client:
        both = both_calculators(client, "agent:main:test:bare")
        result = client.observe(both, tool_calls=["calculate"], texts=["done"])
    assert result is not None and result.recorded, result
    assert result.rewards == {}  # which one was called cannot be told: neither learns
    assert result.referenced == {BILLING: False, TRAVEL: False}
    assert {k: list(v) for k, v in result.ambiguous.items()} == {"calculate": [BILLING, TRAVEL]}
    assert "credited to none" in result.message and BILLING in result.message


def test_a_tool_found_through_tool_search_and_used_joins_the_session(
    agent: list[tuple[str, str, Selection, ObserveResult]],
) -> None:
    loaded = [
        (session, index, result)
        for index, (session, message, selection, result) in enumerate(agent)
        if message in RAIN and FORECAST in selection.deferred
    ]
    assert loaded, "the forecast tool was never left out for tool search"
    joined = 0
    for session, index, result in loaded:
        # loaded and used: referenced and rewarded as if it had been in the prompt
        assert result.referenced[FORECAST] is True and result.rewards[FORECAST] == 1.0
        following = [sel for s, _, sel, _ in agent[index + 1 :] if s == session]
        if following:
            # it joins apart from the cached prefix (or in it, should the set be drawn again)
            nxt = following[0]
            assert FORECAST in nxt.added or nxt.keeps(FORECAST), f"{session}: {nxt}"
            joined += 1
    assert joined, "no session went on after the forecast was loaded"
