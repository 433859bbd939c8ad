"""The engine package imports its names on first use, and every exported name resolves."""

from __future__ import annotations

import json
import subprocess
import sys

import learning_bot.engine as engine
from tests.processes import inherited


def test_every_exported_name_resolves_from_its_module() -> None:
    assert sorted(engine._LAZY) == sorted(engine.__all__)
    for name in engine.__all__:
        value = getattr(engine, name)
        module = sys.modules[engine._LAZY[name]]
        assert value is getattr(module, name), name


def test_one_module_does_not_import_the_others() -> None:
    probe = (
        "import json, sys\n"
        "from learning_bot.engine.config import LearningConfig\n"
        "print(json.dumps([m for m in sys.modules\n"
        "                  if m.startswith('learning_bot.engine.') or m == 'numpy']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=inherited(),
        timeout=60,
        check=True,
    )
    loaded = json.loads(done.stdout)
    assert "numpy" not in loaded and "learning_bot.engine.observation" not in loaded, loaded
    assert "learning_bot.engine.config" in loaded
