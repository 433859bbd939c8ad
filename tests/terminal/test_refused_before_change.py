"""Commands that cannot run are refused in one line before they change anything: a simulation
with an option it cannot run with leaves the learner as it was (and creates none), and `serve`
on a port another process holds says so instead of a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import inherited

EXE = str(Path(sys.executable).with_name("learning-bot"))


def _run(args: list[str], db: str) -> tuple[int, str, str]:
    env = inherited({"LEARNING_BOT_DATABASE_URL": db})
    done = subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--seed", "-1"], "--seed must be from 0 to"),
        (["--seed", str(2**64)], "--seed must be from 0 to"),
        (["--recall-target", "0"], "--recall-target must be a share in (0, 1]"),
        (["--recall-target", "5"], "--recall-target must be a share in (0, 1]"),
        (["--recall-target", "nan"], "--recall-target must be a share in (0, 1]"),
        (["--traces", "0"], "--traces must be from 1"),
    ],
)
def test_a_simulation_refused_for_its_options_changes_and_creates_nothing(
    tmp_path: Path, options: list[str], says: str
) -> None:
    db = f"sqlite:///{tmp_path}/s.sqlite"
    assert _run(["learner", "create", "sim"], db)[0] == 0
    code, _, err = _run(["--learner", "sim", "simulate", "--traces", "5", *options], db)
    assert code == 2 and says in err and "Traceback" not in err, err
    code, out, _ = _run(["--learner", "sim", "phase", "--json"], db)
    assert code == 0 and '"phase": "passive"' in out, out
    code, out, _ = _run(["--learner", "sim", "config", "--json"], db)
    assert code == 0 and '"recallTarget": null' in out, out
    code, _, err = _run(["--learner", "fresh", "simulate", "--traces", "5", *options], db)
    assert code == 2
    code, _, err = _run(["--learner", "fresh", "status"], db)
    assert code == 2 and "unknown learner 'fresh'" in err, err


def test_a_simulation_the_learner_s_policy_refuses_leaves_its_phase(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/s.sqlite"
    assert _run(["learner", "create", "sim"], db)[0] == 0
    assert _run(["learner", "set", "sim", "policy=seed"], db)[0] == 0
    code, _, err = _run(["--learner", "sim", "simulate", "--recall-target", "0.9"], db)
    assert code == 2 and "seed policy" in err, err
    code, out, _ = _run(["--learner", "sim", "phase", "--json"], db)
    assert '"phase": "passive"' in out, out


def test_replay_refuses_a_negative_seed(tmp_path: Path) -> None:
    log = tmp_path / "empty.jsonl"
    log.write_text("")
    code, out, err = _run(["replay", "--seed", "-3", str(log)], f"sqlite:///{tmp_path}/x.db")
    assert (code, out) == (2, "") and err.startswith("learning-bot: --seed must be from 0 to")


def test_serve_on_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        for extra in ([], ["--workers", "2"]):
            code, _, err = _run(
                ["serve", "--port", str(port), *extra], f"sqlite:///{tmp_path}/s.sqlite"
            )
            assert code == 1, err
            assert (
                err.splitlines()[0] == f"learning-bot: port {port} on 127.0.0.1 is already in use"
            )
            assert "Traceback" not in err and len(err.splitlines()) == 2, err
    finally:
        holder.close()


def test_db_verify_of_a_missing_or_empty_database_says_so_and_creates_nothing(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "new.db"
    code, out, err = _run(["db", "verify"], f"sqlite:///{missing}")
    assert (code, out) == (
        1,
        "",
    ) and err == f"learning-bot: no database at {missing}: nothing to verify\n"
    assert not missing.exists()
    code, _, err = _run(["db", "verify"], "sqlite://")
    assert code == 1 and "the database is empty" in err and "not created by" not in err, err


def test_a_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(bytes(range(256)) * 20)
    for argv in (["status"], ["db", "verify"], ["export"]):
        code, out, err = _run(argv, f"sqlite:///{corrupt}")
        assert (code, out) == (1, ""), (argv, err)
        assert err == f"learning-bot: cannot read {corrupt}: file is not a database\n", (argv, err)


def test_bytes_that_are_not_text_in_the_config_file_or_the_database_url(tmp_path: Path) -> None:
    config = tmp_path / "bin.json"
    config.write_bytes(b"\xff\xfe{}")
    db = f"sqlite:///{tmp_path}/s.sqlite"
    code, _, err = _run(["--config", str(config), "status"], db)
    assert code == 2 and "bin.json is not UTF-8 text" in err and "unexpected" not in err, err
    env = inherited({})
    env.pop("LEARNING_BOT_DATABASE_URL", None)
    done = subprocess.run(
        [
            EXE.encode(),
            b"--database-url",
            f"sqlite:///{tmp_path}/".encode() + b"\xff.db",
            b"status",
        ],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert b"holds bytes that are not UTF-8" in done.stderr and b"unexpected" not in done.stderr
    assert list(tmp_path.iterdir()) == [config]
