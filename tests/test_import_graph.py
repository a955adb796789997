"""No two modules of dy2st import each other, directly or through others: at module level or
inside a function (an import deferred into a function is still a dependency). A leaf module
(`user_code`, `runtime/values`, `config`, `errors`) is where shared facts live instead."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "dy2st")


def _modules() -> dict:
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                found[module.removesuffix(".__init__")] = path
    return found


def _imports(module: str, path: str, modules: dict) -> set:
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                name = f"{base}.{alias.name}"
                out.add(name if name in modules else base)
    return {m for m in out if m in modules and m != module}


def _cycles(graph: dict) -> list:
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    modules = _modules()
    graph = {m: _imports(m, p, modules) for m, p in modules.items()}
    assert _cycles(graph) == []


def test_the_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_one_trace_context():
    """What is being traced now lives in `runtime/trace_context.CONTEXT` alone: no other runtime
    module keeps a thread-local of its own (each once meant "the current trace or side")."""
    modules = _modules()
    keeping = [m for m, path in modules.items()
               if m.startswith("dy2st.runtime") and m != "dy2st.runtime.trace_context"
               and "threading.local" in open(path).read()]
    assert keeping == []
