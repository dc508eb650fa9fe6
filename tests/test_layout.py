"""The architecture as the folders show it: imports flow one way, the research code stays out of
the core, and no file or function grows past what a reader takes in."""

import ast
import pathlib
import subprocess
import sys

import pytest
from conftest import ROOT

PACKAGE = ROOT / "policy_gnn_jax"
# Each part of the package and its layer: a part imports only parts of lower layers (and itself).
LAYERS = {
    "config": 0,
    "metrics": 0,
    "data": 0,
    "graph": 1,
    "runtime": 1,
    "backbones": 2,
    "agents": 2,
    "mdp": 3,
    "fixed_depth": 3,
    "methods": 4,
    "custom_parts": 4,
    "fits": 5,
    "api": 6,
    "loading": 6,
    "split_sweep": 7,
    "cli": 8,
    "__init__": 9,
    "contrib": 10,
}


def _part(module: str) -> str:
    """policy_gnn_jax.graph.subgraph -> "graph"; policy_gnn_jax -> "__init__"."""
    names = module.split(".")
    return names[1] if len(names) > 1 else "__init__"


def _project_imports(path: pathlib.Path) -> set[str]:
    """The policy_gnn_jax modules a file imports (`from policy_gnn_jax import x` -> ...x)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("policy_gnn_jax")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("policy_gnn_jax"):
            if node.module == "policy_gnn_jax":
                found |= {f"policy_gnn_jax.{a.name}" for a in node.names}
            else:
                found.add(node.module)
    return found


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        yield path, name.removesuffix(".__init__")


def test_every_part_of_the_package_has_a_layer():
    parts = {_part(name) for _, name in _modules()}
    assert parts == set(LAYERS), parts ^ set(LAYERS)


def _upward_imports(path: pathlib.Path, name: str) -> list[str]:
    own = _part(name)
    return [
        f"{name} ({own}, layer {LAYERS[own]}) imports {target}"
        for target in sorted(_project_imports(path))
        if _part(target) != own and LAYERS[_part(target)] >= LAYERS[own]
    ]


def test_imports_flow_one_way():
    wrong = [line for path, name in _modules() for line in _upward_imports(path, name)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "line", ["from policy_gnn_jax.mdp import loop", "from policy_gnn_jax import runtime, api"]
)
def test_the_layer_check_can_fail(tmp_path, line):
    """The check above must see an upward or sideways import written into a copy of a module."""
    bad = tmp_path / "graph.py"
    bad.write_text((PACKAGE / "graph" / "graph.py").read_text() + f"\n{line}\n")
    assert _upward_imports(bad, "policy_gnn_jax.graph.graph")


def test_the_core_never_imports_the_research_code():
    """Importing the package, the command line and the built-in methods loads no contrib
    module; asking for policy-gnn-plus by name does."""
    code = (
        "import sys, policy_gnn_jax as pg, policy_gnn_jax.cli\n"
        "for name in ('policy-gnn', 'random', 'gcn', 'fixed-depth'): pg.methods.get(name)\n"
        "before = [m for m in sys.modules if m.startswith('policy_gnn_jax.contrib')]\n"
        "pg.methods.get('policy-gnn-plus')\n"
        "after = [m for m in sys.modules if m.startswith('policy_gnn_jax.contrib')]\n"
        "print(len(before), len(after) > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "True"]


SOURCES = [
    p
    for folder in ("policy_gnn_jax", "experiments", "benchmarks", "tools", "tests")
    for p in sorted((ROOT / folder).rglob("*.py"))
]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_file_over_300_lines_in_the_library_or_400_elsewhere_and_no_function_over_80(path):
    lines = path.read_text().splitlines()
    limit = 300 if PACKAGE in path.parents else 400
    assert len(lines) <= limit, f"{len(lines)} lines"
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse("\n".join(lines)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > 80
    ]
    assert not long, long


# A folder beside the repository, as a path in code would name it: `ROOT.parent / "x"`, `"../x"`.
OUTSIDE = ("ROOT.parent", '"../', "'../")


def _names_a_folder_outside(path: pathlib.Path) -> bool:
    return any(mark in path.read_text() for mark in OUTSIDE)


def test_no_code_reads_a_folder_beside_the_repository():
    """A clone stands alone: no library, script or test reads data from beside the checkout."""
    folders = ("policy_gnn_jax", "experiments", "benchmarks", "tools", "tests")
    offenders = [
        str(p.relative_to(ROOT))
        for folder in folders
        for p in (ROOT / folder).rglob("*.py")
        if p.name != "test_layout.py" and _names_a_folder_outside(p)
    ]
    assert not offenders


def test_the_outside_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('DATA = ROOT.parent / "shared" / "data"\n')
    assert _names_a_folder_outside(bad)
