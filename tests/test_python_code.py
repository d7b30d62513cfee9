"""replace_function and the Python guards of the file tools, through the real executor and files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rune.errors import ToolError, ToolInputError, VariableNotFunction
from rune.tools.executor import SandboxPolicy, ToolExecutor
from rune.tools.files import shown_back

CALC = '''"""A calculator."""
import math


def add(a, b):
    return a - b


class Calc:
    @staticmethod
    def twice(x):
        return x + x

    def half(self, x):
        return x / 3


def mul(a, b):
    return a * b
'''


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "notes.txt").write_text("def add(a, b):\n")
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    return tmp_path


@pytest.fixture
def ex(ws: Path) -> ToolExecutor:
    return ToolExecutor(SandboxPolicy.workspace_only(ws), ws, contain_commands=False)


def apply(ex: ToolExecutor, tool: str, **arguments: str) -> str:
    return ex.apply(ex.prepare(tool, arguments))


def test_replaces_a_top_level_function_and_keeps_everything_else(
    ex: ToolExecutor, ws: Path
) -> None:
    out = apply(
        ex, "replace_function", path="calc.py", name="add", code="def add(a, b):\n    return a + b"
    )
    assert (ws / "calc.py").read_text() == CALC.replace("return a - b", "return a + b")
    assert out.endswith("Lines 6-6 now read as you sent them")


def test_the_result_names_the_file_as_the_model_does_and_echoes_no_code_it_sent(
    ex: ToolExecutor, ws: Path
) -> None:
    code = "def add(a, b):\n    total = a + b\n    return total\n"
    out = apply(ex, "replace_function", path="calc.py", name="add", code=code)
    assert out.startswith("wrote calc.py (")
    assert out.endswith(". Lines 6-7 now read as you sent them")
    assert "total = a + b" not in out
    # code that lands otherwise than sent (re-indented into its class) is shown as it reads
    out = apply(ex, "replace_function", path="calc.py", name="Calc.half",
                code="def half(self, x):\n    y = x / 2\n    return y\n")  # fmt: skip
    assert "now read:\n" in out and "        y = x / 2" in out


def test_a_method_is_reindented_to_its_class(ex: ToolExecutor, ws: Path) -> None:
    code = "def half(self, x):\n    return x / 2\n"
    apply(ex, "replace_function", path="calc.py", name="Calc.half", code=code)
    assert "    def half(self, x):\n        return x / 2\n" in (ws / "calc.py").read_text()
    apply(
        ex,
        "replace_function",
        path="calc.py",
        name="twice",
        code="    @staticmethod\n    def twice(x):\n        return 2 * x\n",
    )
    text = (ws / "calc.py").read_text()
    assert "    @staticmethod\n    def twice(x):\n        return 2 * x\n" in text
    assert text.count("@staticmethod") == 1


ORDINAL = '''def ordinal(number):
    """The suffix of a number: ``ordinal(1)`` is 'st', ``ordinal(-11)`` is 'th'.

    Negative numbers count as positive ones (é, non-ASCII on purpose).
    """
    number = abs(number)
    return "th" if number % 10 in (11, 12, 13) else {1: "st"}.get(number % 10, "th")


class Words:
    def plural(self, word):
        """The plural of ``word``."""
        return word + "s"
'''
FIXED_ORDINAL = """def ordinal(number):
    number = abs(number)
    return "th" if number % 100 in (11, 12, 13) else {1: "st"}.get(number % 10, "th")
"""


def test_a_docstring_the_model_leaves_out_is_kept(ex: ToolExecutor, ws: Path) -> None:
    (ws / "words.py").write_text(ORDINAL)
    out = apply(ex, "replace_function", path="words.py", name="ordinal", code=FIXED_ORDINAL)
    assert (ws / "words.py").read_text() == ORDINAL.replace("% 10 in", "% 100 in")
    assert out.endswith("Lines 7-7 now read as you sent them")  # the line it changed
    # a method's, re-indented with it; and through a code block (every definition in it)
    method = 'def plural(self, word):\n    return word + "es"\n'
    apply(ex, "replace_function", path="words.py", name="Words.plural", code=method)
    text = (ws / "words.py").read_text()
    assert '        """The plural of ``word``."""\n        return word + "es"\n' in text
    apply(ex, "replace_function", path="words.py", name="", code=FIXED_ORDINAL.replace("100", "7"))
    assert "(é, non-ASCII on purpose)" in (ws / "words.py").read_text()


def test_a_docstring_the_model_sends_is_its_own(ex: ToolExecutor, ws: Path) -> None:
    (ws / "words.py").write_text(ORDINAL)
    code = FIXED_ORDINAL.replace("(number):\n", '(number):\n    """New words."""\n')
    apply(ex, "replace_function", path="words.py", name="ordinal", code=code)
    text = (ws / "words.py").read_text()
    assert '"""New words."""' in text and "non-ASCII" not in text
    # documentation as comments above the body (the 1.5B turned a docstring into them): its own
    commented = FIXED_ORDINAL.replace("(number):\n", "(number):\n    # The suffix.\n")
    apply(ex, "replace_function", path="words.py", name="ordinal", code=commented)
    text = (ws / "words.py").read_text()
    assert "    # The suffix.\n    number = abs(number)" in text and "New words" not in text
    # a body on the def's own line has nowhere to put one: taken as sent
    apply(
        ex, "replace_function", path="words.py", name="ordinal", code="def ordinal(n): return n\n"
    )
    assert "def ordinal(n): return n\n" in (ws / "words.py").read_text()


def test_a_class_sent_to_change_the_method_it_is_named_by_changes_that_method(
    ex: ToolExecutor, ws: Path
) -> None:
    """The 1.5B on a spec task: name="__init__", the code the class with __init__ alone."""
    code = "class Calc:\n    def half(self, x):\n        return x / 2\n"
    apply(ex, "replace_function", path="calc.py", name="half", code=code)
    text = (ws / "calc.py").read_text()
    assert "    def half(self, x):\n        return x / 2\n" in text
    assert "def twice(x)" in text and text.count("class Calc") == 1  # the rest of it stays
    code = code.replace("x / 2", "x * 0.5")
    apply(ex, "replace_function", path="calc.py", name="Calc.half", code=code)
    assert "return x * 0.5" in (ws / "calc.py").read_text()
    # a name the class does not hold is still refused with what it defines
    with pytest.raises(ToolInputError, match="it defines Calc"):
        apply(ex, "replace_function", path="calc.py", name="third", code=code)


def test_a_missing_function_is_added_at_the_end(ex: ToolExecutor, ws: Path) -> None:
    apply(
        ex,
        "replace_function",
        path="calc.py",
        name="sub",
        code="def sub(a, b):\n    return a - b\n",
    )
    assert (ws / "calc.py").read_text() == CALC + "\n\ndef sub(a, b):\n    return a - b\n"


def test_a_new_function_named_after_a_variable_names_the_function_to_send(
    ex: ToolExecutor, ws: Path
) -> None:
    # The 1.5B sent `def indegree(node): ...` for the dict in topological_order, every run.
    source = (
        "def order(nodes, key):\n    indegree = {n: 0 for n in nodes}\n    return indegree\n\n\n"
        "class Graph:\n    def size(self):\n        total = 0\n        return total\n\n\n"
        "counter = 0\n\n\ndef bump():\n    global counter\n    counter += 1\n"
    )
    (ws / "graph.py").write_text(source)
    for name, where in [("indegree", "order (line 2)"), ("total", "Graph.size (line 8)")]:
        code = f"def {name}(x):\n    return x\n"
        arguments = {"path": "graph.py", "name": name, "code": code}
        with pytest.raises(VariableNotFunction, match=re.escape(f"a variable in {where}")) as err:
            ex.prepare("replace_function", arguments)
        assert err.value.owner == where.split(" ")[0]
    assert (ws / "graph.py").read_text() == source
    # a parameter's name, or a global's, may be a new function's
    for name in ["key", "counter"]:
        code = f"def {name}(x):\n    return x\n"
        apply(ex, "replace_function", path="graph.py", name=name, code=code)
        assert (ws / "graph.py").read_text().endswith("\n\n\n" + code)


def test_imports_sent_above_a_function_join_the_files_own_once(ex: ToolExecutor, ws: Path) -> None:
    # The 1.5B sent `from datetime import timedelta` above its function, four times: each
    # resend put one more import line above the definition, so it never read as "nothing to
    # change" and the run looped on it.
    code = "import math\nfrom datetime import timedelta\ndef add(a, b):\n    return a + b\n"
    apply(ex, "replace_function", path="calc.py", name="add", code=code)
    expected = CALC.replace("import math\n", "import math\nfrom datetime import timedelta\n")
    assert (ws / "calc.py").read_text() == expected.replace("return a - b", "return a + b")
    with pytest.raises(ToolInputError, match="nothing to change"):
        ex.prepare("replace_function", {"path": "calc.py", "name": "add", "code": code})
    # into a class: the import goes to the top of the file, the method to its class
    method = "import os\ndef half(self, x):\n    return x / 2\n"
    apply(ex, "replace_function", path="calc.py", name="Calc.half", code=method)
    text = (ws / "calc.py").read_text()
    assert text.count("import os\n") == 1 and text.index("import os") < text.index("def add")
    assert "    def half(self, x):\n        return x / 2\n" in text


F = "def add(): pass"
REFUSALS = [
    ("notes.txt", "add", F, ToolInputError, "edits Python files"),
    ("new.py", "add", F, ToolError, "does not exist"),
    ("broken.py", "f", "def f(): pass", ToolError, "does not parse now (line 1"),
    ("calc.py", "add", "    return a + b", ToolInputError, "it defines nothing"),
    ("calc.py", "add", "def plus(a, b):\n    return a + b", ToolInputError, "it defines plus"),
    ("calc.py", "add;rm", F, ToolInputError, "must be a function or class"),
    ("calc.py", "Nope.add", F, ToolError, "has no Nope.add"),
    ("calc.py", "add", "def add(a, b):\nreturn a", ToolError, "not valid Python on its own"),
    ("calc.py", "add", 'def add(a, b):\n    """Sum."""', ToolError, "has no body"),
    ("calc.py", "add", "def add(a, b):\n    ...", ToolError, "has no body"),
]


@pytest.mark.parametrize(("path", "name", "code", "error", "message"), REFUSALS)
def test_replace_function_refuses_with_what_to_send_instead(
    ex: ToolExecutor,
    ws: Path,
    path: str,
    name: str,
    code: str,
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        ex.prepare("replace_function", {"path": path, "name": name, "code": code})
    assert (ws / "calc.py").read_text() == CALC


def test_a_stub_may_replace_a_stub(ex: ToolExecutor, ws: Path) -> None:
    (ws / "todo.py").write_text('def later():\n    """To do."""\n')
    apply(ex, "replace_function", path="todo.py", name="later", code="def later():\n    pass")
    # (its docstring kept: test_a_docstring_the_model_leaves_out_is_kept)
    assert (ws / "todo.py").read_text() == 'def later():\n    """To do."""\n    pass\n'


def test_an_ambiguous_name_asks_for_class_dot_method(ex: ToolExecutor, ws: Path) -> None:
    (ws / "two.py").write_text(
        "class A:\n    def f(self): pass\n\n\nclass B:\n    def f(self): pass\n"
    )
    with pytest.raises(ToolInputError, match=r"defined 2 times .* Class\.method"):
        ex.prepare(
            "replace_function", {"path": "two.py", "name": "f", "code": "def f(self): return 1"}
        )
    apply(ex, "replace_function", path="two.py", name="B.f", code="def f(self):\n    return 2")
    assert (ws / "two.py").read_text().endswith("class B:\n    def f(self):\n        return 2\n")


# --- guards on write_file and edit_file -------------------------------------------------------


def test_a_write_that_breaks_the_syntax_is_refused_before_approval(
    ex: ToolExecutor, ws: Path
) -> None:
    broken = CALC.replace("return a - b", "return a +")
    with pytest.raises(
        ToolError, match=r"invalid Python \(line 6: invalid syntax: `return a \+`\)"
    ):
        ex.prepare("write_file", {"path": "calc.py", "content": broken})
    with pytest.raises(ToolError, match="invalid Python"):
        ex.prepare("edit_file", {"path": "calc.py", "old_text": "a - b", "new_text": "a -"})
    with pytest.raises(ToolError, match="invalid Python"):
        ex.prepare("write_file", {"path": "new_module.py", "content": "def f(:\n"})
    assert (ws / "calc.py").read_text() == CALC


def test_a_whole_file_write_that_drops_functions_is_refused(ex: ToolExecutor, ws: Path) -> None:
    only_add = "def add(a, b):\n    return a + b\n"
    with pytest.raises(ToolError, match=r"leaves out class Calc, mul\(\)") as caught:
        ex.prepare("write_file", {"path": "calc.py", "content": only_add})
    assert "replace_function" in str(caught.value)
    # edit_file may delete a function on purpose, and write_file may keep every one.
    apply(
        ex, "edit_file", path="calc.py", old_text="def mul(a, b):\n    return a * b\n", new_text=""
    )
    assert "def mul" not in (ws / "calc.py").read_text()


def test_non_python_files_and_files_already_broken_are_not_judged(
    ex: ToolExecutor, ws: Path
) -> None:
    apply(ex, "write_file", path="notes.txt", content="def (((\n")
    apply(ex, "write_file", path="broken.py", content="still (broken\n")
    assert (ws / "broken.py").read_text() == "still (broken\n"


def test_hostile_python_is_a_tool_error_not_a_crash(ex: ToolExecutor, ws: Path) -> None:
    deep = "x = " + "(" * 5000 + ")" * 5000 + "\n"
    with pytest.raises(ToolError, match="invalid Python"):
        ex.prepare("write_file", {"path": "deep.py", "content": deep})
    nul = "x = 1\0\n"
    with pytest.raises(ToolError, match="contains NUL"):  # text tools take text
        ex.prepare("write_file", {"path": "nul.py", "content": nul})


LONG = b"x\n" + b"y\n" * 40
LONG_SHOWN = ". Lines 2-41 now read:\n" + "".join(f"{n:>6}\ty\n" for n in range(2, 32))
ESCAPED = (
    "     1\t\\x1b[2Ja\n[1 control or invisible character(s) shown escaped as \\xNN or \\uNNNN]"
)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (None, b"a\nb\n", ". Lines 1-2 now read:\n     1\ta\n     2\tb"),
        (b"a\nb\nc\n", b"a\nB\nc\n", ". Lines 2-2 now read:\n     2\tB"),
        (b"a\nb\nc\n", b"a\nc\n", "; 1 line(s) removed after line 1"),
        (b"a\n", b"", "; the file is empty"),
        (b"x\n", LONG, LONG_SHOWN + "[10 more changed line(s) not shown]"),
        (b"a\n", b"\x1b[2Ja\n", ". Lines 1-1 now read:\n" + ESCAPED),
    ],
)
def test_shown_back(before: bytes | None, after: bytes, expected: str) -> None:
    assert shown_back(before, after) == expected
