"""House rules on imports: layers app > ui > engine, the engine free of Qt, torch, the UI and
the app, engine.core and engine.wire free of the rest of the engine, of I/O, threads and clocks,
no cycles.

The contracts live in pyproject.toml ([tool.importlinter]); `lint-imports` checks them from the
source, every import counted (function-level and TYPE_CHECKING ones too). The tests here run it,
and check at run time what a static check cannot: every module imports, and importing all of the
engine loads no Qt, torch, UI or app module.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the gui extra brings tomli on 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
# Modules that may fail to import here, and only for the named missing third-party package:
# optional backends whose dependency is never in the dev environment on purpose.
OPTIONAL_IMPORTS: dict[str, str] = {}
# The only engine modules engine.core may import (besides itself).
CORE_MAY_IMPORT = ("engine.types", "engine.events", "engine.errors")
FORBIDDEN_IN_ENGINE = ("PySide6", "shiboken6", "ui", "app", "torch")

IMPORT_ALL = """
import importlib, json, pkgutil, sys
packages = sys.argv[1].split(',')
failed = {}
for package in packages:
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + '.'):
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # every failure is reported, none skipped
            failed[info.name] = [type(exc).__name__, getattr(exc, 'name', None), str(exc)]
roots = sorted({n.split('.')[0] for n in sys.modules})
print(json.dumps({'failed': failed, 'roots': roots}))
"""


def _import_all(*packages: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", IMPORT_ALL, ",".join(packages)], cwd=REPO,
                         capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _unexpected_failures(failed: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: why for name, why in failed.items()
            if not (why[0] == "ModuleNotFoundError" and OPTIONAL_IMPORTS.get(name) == why[1])}


def test_every_engine_module_imports_and_pulls_in_no_qt_ui_app_or_torch() -> None:
    result = _import_all("engine")
    assert _unexpected_failures(result["failed"]) == {}  # type: ignore[arg-type]
    bad = [root for root in result["roots"] if root in FORBIDDEN_IN_ENGINE]  # type: ignore[attr-defined]
    assert bad == [], f"importing the engine loaded {bad}"


def test_every_app_and_ui_module_imports() -> None:
    pytest.importorskip("PySide6")
    result = _import_all("ui", "app")
    assert _unexpected_failures(result["failed"]) == {}  # type: ignore[arg-type]


@pytest.mark.parametrize(("contract", "package", "may_import"), [
    ("core-pure", "engine.core", CORE_MAY_IMPORT),
    ("wire-pure", "engine.wire", (*CORE_MAY_IMPORT, "engine.core")),
])
def test_pure_contract_forbids_every_other_engine_module(
        contract: str, package: str, may_import: tuple[str, ...]) -> None:
    """The core-pure and wire-pure contracts list what engine.core and engine.wire must not
    import; a new engine module must join both lists (import-linter has no "only these"
    contract)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}
    forbidden = set(contracts[contract]["forbidden_modules"])
    children = {f"engine.{p.stem}" for p in (REPO / "engine").iterdir()
                if (p.suffix == ".py" and p.stem != "__init__")
                or (p.is_dir() and (p / "__init__.py").exists())}
    expected = children - {package, *may_import}
    assert forbidden == expected


def test_import_contracts_hold() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.fail("lint-imports not installed: pip install -e '.[dev]' (import-linter)")
    out = subprocess.run([lint, "--no-logo", "--no-cache"], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
