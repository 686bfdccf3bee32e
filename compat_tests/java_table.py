"""The table of the Java client suite's cases in compat_tests/README.md.

    python -m compat_tests.java_table

reads compat_tests/test_java_client.py with ``ast`` (nothing is imported or
run) and writes one row per test function (its name, the values it is
parametrized with, the first line of its docstring, and the reason when it is
an expected failure) between the README's ``java-cases`` markers.
test_java_client.py fails when the README's table differs from this one.
"""

from __future__ import annotations

import ast
import pathlib
import sys
from dataclasses import dataclass

HERE = pathlib.Path(__file__).parent
TESTS = HERE / "test_java_client.py"
README = HERE / "README.md"
START = "<!-- java-cases:start -->"
END = "<!-- java-cases:end -->"


@dataclass(frozen=True)
class Case:
    name: str
    parameters: tuple[tuple[str, tuple], ...]  # (argument names, values) per parametrize decorator
    summary: str
    expected_failure: str | None  # the xfail reason


def _mark(decorator: ast.expr, name: str) -> ast.Call | None:
    """The call if ``decorator`` is ``pytest.mark.<name>(...)``."""
    if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) and decorator.func.attr == name:
        return decorator
    return None


def _value(node: ast.expr, constants: dict[str, ast.expr]):
    """A literal, or a module-level constant holding one."""
    if isinstance(node, ast.Name) and node.id in constants:
        node = constants[node.id]
    return ast.literal_eval(node)


def _keyword(call: ast.Call, name: str, constants: dict[str, ast.expr]):
    return next((_value(k.value, constants) for k in call.keywords if k.arg == name), None)


def read_cases(source: str) -> list[Case]:
    module = ast.parse(source)
    constants = {
        target.id: statement.value
        for statement in module.body if isinstance(statement, ast.Assign)
        for target in statement.targets if isinstance(target, ast.Name)
    }
    cases = []
    for function in module.body:
        if not (isinstance(function, ast.FunctionDef) and function.name.startswith("test_")):
            continue
        docstring = ast.get_docstring(function)
        if not docstring:
            raise ValueError(f"{function.name} has no docstring: say in one line what it shows")
        parameters, expected_failure = [], None
        for decorator in function.decorator_list:
            if call := _mark(decorator, "parametrize"):
                parameters.append((_value(call.args[0], constants), tuple(_value(call.args[1], constants))))
            elif call := _mark(decorator, "xfail"):
                expected_failure = _keyword(call, "reason", constants) or "expected to fail"
        cases.append(Case(function.name, tuple(parameters), docstring.splitlines()[0].strip(), expected_failure))
    return cases


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table(source: str | None = None) -> str:
    cases = read_cases(TESTS.read_text(encoding="utf-8") if source is None else source)
    lines = ["| Test | Cases | What it shows |", "| --- | --- | --- |"]
    for case in cases:
        parameters = "; ".join(f"`{names}`: {', '.join(map(str, values))}" for names, values in case.parameters) or "—"
        summary = case.summary
        if case.expected_failure:
            summary += f" **Known broker gap (xfail):** {case.expected_failure}"
        lines.append(f"| `{case.name}` | {_cell(parameters)} | {_cell(summary)} |")
    return "\n".join(lines) + "\n"


def with_table(readme: str, table: str) -> str:
    """The README text with ``table`` between the markers."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{README.name} lacks the {START} ... {END} markers")
    return readme[: start + len(START)] + "\n" + table + readme[end:]


def main() -> int:
    readme = README.read_text(encoding="utf-8")
    updated = with_table(readme, render_table())
    if updated == readme:
        print(f"{README} is current")
    else:
        README.write_text(updated, encoding="utf-8")
        print(f"{README}: table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
